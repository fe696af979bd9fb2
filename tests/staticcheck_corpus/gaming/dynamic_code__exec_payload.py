# rule: dynamic_code
"""Hides its real forward in a base64 payload executed at import time."""

import base64

import torch.nn as nn

_PAYLOAD = "ZGVmIF9mb3J3YXJkKHNlbGYsIHgpOgogICAgcmV0dXJuIHNlbGYucHJvaih4LnN1bSgwKSkK"
_namespace = {}
exec(base64.b64decode(_PAYLOAD).decode(), _namespace)  # <-


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 56)

    def forward(self, x):
        return _namespace["_forward"](self, x)
