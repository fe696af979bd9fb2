"""Generated protobuf and gRPC stubs (tools/gen_protos.py)."""
