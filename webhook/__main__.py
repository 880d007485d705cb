"""`python -m webhook` runs the ringroute command line."""

import sys

from webhook.cli import main

sys.exit(main())
