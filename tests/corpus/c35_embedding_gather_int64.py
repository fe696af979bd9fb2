import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices):
        return self.embedding(indices)


num_embeddings = 50000
embedding_dim = 512
batch = 64
seq_len = 256


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch, seq_len), device="cuda", dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, embedding_dim]


gather_source = r"""
#include <torch/extension.h>
#include <cstdint>

// One block per looked-up row; the row is copied with float4 loads.
__global__ void embedding_gather_kernel(const int64_t* __restrict__ indices, const float4* __restrict__ table,
                                        float4* __restrict__ out, int dim4) {
    int64_t row = indices[blockIdx.x];
    const float4* src = table + row * dim4;
    float4* dst = out + (int64_t)blockIdx.x * dim4;
    for (int i = threadIdx.x; i < dim4; i += blockDim.x) dst[i] = src[i];
}

torch::Tensor embedding_forward(torch::Tensor indices, torch::Tensor table) {
    TORCH_CHECK(table.size(1) % 4 == 0, "embedding_dim must be a multiple of 4");
    auto idx = indices.contiguous();
    int dim = table.size(1);
    auto sizes = idx.sizes().vec();
    sizes.push_back(dim);
    auto out = torch::empty(sizes, table.options());
    int64_t lookups = idx.numel();
    embedding_gather_kernel<<<lookups, 128>>>(idx.data_ptr<int64_t>(),
                                              reinterpret_cast<const float4*>(table.data_ptr<float>()),
                                              reinterpret_cast<float4*>(out.data_ptr<float>()), dim / 4);
    return out;
}
"""

embedding_ext = load_inline(
    name="embedding_gather",
    cpp_sources="torch::Tensor embedding_forward(torch::Tensor indices, torch::Tensor table);",
    cuda_sources=gather_source,
    functions=["embedding_forward"],
    extra_cuda_cflags=["-O3", "-gencode", "arch=compute_90,code=sm_90", "-Xptxas", "-v"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices):
        return embedding_ext.embedding_forward(indices, self.embedding.weight.contiguous())
