#!/usr/bin/env bash
# Host memory beside a GPU run, for the evidence replays killed under concurrent judges (docs/threat-model.md, Open):
# every second, the free memory and the largest processes, and ncu's; at the end, what the kernel logged of OOM kills.
#   bash baselines/bench/watch_host.sh "$OUT/host.log" & watcher=$!; ...; kill $watcher
log=${1:-/tmp/host.log}
trap 'dmesg 2>/dev/null | grep -iE "oom|killed process" | tail -n 40 >> "$log"; exit 0' TERM INT
while true; do
    {
        echo "--- $(date -u +%T) $(free -m | awk 'NR==2 {print "used", $3, "MiB, available", $7, "MiB"}')"
        ps -eo rss=,pid=,ppid=,comm= --sort=-rss | head -n 6
        ps -eo rss=,pid=,comm=,args= | grep -E '[n]cu |evidence' | cut -c1-160 | head -n 8
    } >> "$log"
    sleep 1
done
