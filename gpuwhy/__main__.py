import sys

from gpuwhy.cli import main

sys.exit(main())
