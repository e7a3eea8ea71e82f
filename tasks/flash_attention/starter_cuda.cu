// Starter: one warp per query row of one (batch, head). The 32 lanes split head_dim (each holds up
// to 4 of its elements of q and of the output accumulator); for each key the warp computes the dot
// product with a shuffle reduction, then updates an online softmax: m is the running maximum score,
// l the running sum of exp(score - m), acc the running sum of exp(score - m) * v. Correct for any
// seq and head_dim <= 128 and never stores the score matrix, but slow: one key at a time on CUDA
// cores, and every row re-reads all of k and v. A fast kernel gives a block a tile of query rows,
// stages k/v tiles through shared memory and does both products on tensor cores.
#include <cuda_bf16.h>
#include <cstdint>

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 4;  // head_dim <= 32 * 4

// `static` keeps the kernel's symbol private to this library: two libraries loaded into one
// process that both define a kernel of the same name could otherwise launch each other's.
static __global__ void attention_row_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                            const __nv_bfloat16* v, __nv_bfloat16* out,
                                            int64_t rows, int seq, int head_dim, float scale, int causal) {
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;  // over batch*heads*seq
    if (row >= rows) return;
    const int64_t head = row / seq * seq * head_dim;  // start of this (batch, head) in q, k, v, out
    float qr[kMaxPerLane], acc[kMaxPerLane];
    for (int i = 0; i < kMaxPerLane; ++i) {
        const int c = lane + 32 * i;
        qr[i] = c < head_dim ? __bfloat162float(q[row * head_dim + c]) * scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int keys = causal ? (int)(row % seq) + 1 : seq;  // causal: query i sees keys 0..i
    for (int j = 0; j < keys; ++j) {
        const __nv_bfloat16* kj = k + head + (int64_t)j * head_dim;
        float s = 0.0f;
        for (int i = 0; i < kMaxPerLane; ++i) {
            const int c = lane + 32 * i;
            if (c < head_dim) s += qr[i] * __bfloat162float(kj[c]);
        }
        for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
        const float m_new = fmaxf(m, s);
        const float alpha = expf(m - m_new);  // rescales what was summed under the old maximum
        const float p = expf(s - m_new);
        l = l * alpha + p;
        const __nv_bfloat16* vj = v + head + (int64_t)j * head_dim;
        for (int i = 0; i < kMaxPerLane; ++i) {
            const int c = lane + 32 * i;
            if (c < head_dim) acc[i] = acc[i] * alpha + p * __bfloat162float(vj[c]);
        }
        m = m_new;
    }
    for (int i = 0; i < kMaxPerLane; ++i) {
        const int c = lane + 32 * i;
        if (c < head_dim) out[row * head_dim + c] = __float2bfloat16(acc[i] / l);
    }
}

extern "C" void solution(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         __nv_bfloat16* out, int batch, int heads, int seq, int head_dim, int causal,
                         cudaStream_t stream) {
    const int64_t rows = (int64_t)batch * heads * seq;
    if (rows <= 0) return;
    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    attention_row_kernel<<<(unsigned)blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        q, k, v, out, rows, seq, head_dim, 1.0f / sqrtf((float)head_dim), causal);
}
