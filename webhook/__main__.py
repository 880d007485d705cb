"""`python -m webhook` runs the ringroute command line."""

import sys

from webhook.cli.main import main

sys.exit(main())
