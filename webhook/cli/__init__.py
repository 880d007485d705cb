"""The `ringroute` command line: `main` builds the parser from one argparse module per command."""
