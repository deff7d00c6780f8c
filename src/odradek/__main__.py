import sys

from odradek.cli.main import main

sys.exit(main())
