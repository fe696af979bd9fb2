"""The profsvc wire contract both sides stand on: the gRPC stubs, the typed results, the error tree, units.

`profsvc_contract.models` (pydantic models of every request part and result), `errors` (the exception tree and
its reason codes, with their gRPC status codes and exit codes), `convert` (models to and from protobuf),
`units` (how figures are shown), `document` (results as versioned JSON documents), `channel` (message limits
and channel options both ends use), `tokens` (what a bearer token may hold), and `_proto` (stubs generated
from protos/ by tools/gen_protos.py).

It imports neither the client (profsvc_client) nor the server (profsvc). Importing a module here imports
only what that module needs: `models` loads no grpc, so a process that reads reports may use it.
"""
