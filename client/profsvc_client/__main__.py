"""`python -m profsvc_client`: the `profsvc` command."""

import sys

from profsvc_client.cli import main

sys.exit(main())
