import sys

from kerneldojo.cli import main

sys.exit(main())
