"""`python -m profsvc`: the `profsvc` command, which the client package provides (the server adds `serve`)."""

import importlib
import sys

try:
    # Looked up at run time: the server's package never imports the client's.
    cli = importlib.import_module("profsvc_client.cli")
except ImportError:
    print("profsvc: error: the profsvc command comes with profsvc-client: pip install -e ./client", file=sys.stderr)
    sys.exit(2)
sys.exit(cli.main())
