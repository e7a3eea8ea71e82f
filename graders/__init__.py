"""Grading steps, one module each: compile, correctness, timing, checks, roofline, reward."""
