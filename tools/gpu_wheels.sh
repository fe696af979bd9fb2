#!/usr/bin/env bash
# What a GPU host that can download nothing needs beside its own image (Python 3.12, torch, grpcio, protobuf,
# pandas, pyarrow, rich...): the wheels below and Debian's bubblewrap, fetched here into .whl/ (git-ignored), which
# tools/gpu_suite.sh, gpu_corpus.sh and gpu_cluster.sh install there. No dependency is resolved (none may replace
# the image's torch): each one the image lacks is named.
# Usage: tools/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=(
  # the server and the client
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  grpcio-health-checking==1.84.0 grpcio-reflection==1.84.0 grpcio-status==1.84.0 googleapis-common-protos==1.76.0
  pyseccomp==0.1.2 nvtx==0.2.16 argcomplete==3.7.2 google-re2==1.1.20251105
  # the HTML report
  plotly==7.1.0
  # clusters (profsvc batch --cluster)
  dask==2026.8.0 distributed==2026.8.0 partd==1.4.2 locket==1.0.0 tblib==3.2.2 zict==3.0.0 tornado==6.6.1
  bokeh==3.10.2 xyzservices==2026.9.1
  # what dask, distributed and bokeh require beyond the image's torch, typer and matplotlib (their metadata's
  # Requires-Dist): carried whether or not the image has them, as it lists none of them
  cloudpickle==3.1.3 msgpack==1.2.4 psutil==7.2.2 pyyaml==6.0.4 sortedcontainers==2.4.0 toolz==1.2.0 narwhals==2.29.0
  # the MCP server (profsvc mcp) and the MCP SDK's client in its GPU test; click and typing-extensions come with
  # the image's typer and torch
  mcp==2.3.0 mcp-types==2.3.0 anyio==4.16.0 httpx2==2.17.0 httpcore2==2.17.0 h11==0.16.0 idna==3.20
  truststore==0.10.5 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
  attrs==26.1.0 opentelemetry-api==1.45.3 pyjwt==2.15.1 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12
  python-multipart==0.0.34 sse-starlette==3.7.1 starlette==1.10.0 uvicorn==0.55.0
)
platforms=()
for n in 39 35 34 31 28 27 24 17 5; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
mkdir -p .whl/debs
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${wheels[@]}"
(cd .whl/debs && apt-get download bubblewrap)
ls .whl .whl/debs
