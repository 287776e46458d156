// The gated delta rule's decode step for the fast sampler's Qwen3.5 layers, fused (rlvr.sampling.deltanet's
// recurrent_step, same contract): per row and value head, the float32 state S (Dk x Dv) is read once for both
// products it is needed in (k^T S and q^T S), then updated in place while it is still in the core's cache:
//
//     delta = beta (v - a k^T S),   o = a q^T S + (q . k) delta,   S <- a S + k delta^T     (a = exp(g))
//
// which is transformers' recurrent reference (decay, read, write, then o = q^T S_new) up to float32 rounding. The
// torch ops pass over the whole state four times a step, and the state is most of a decode step's memory traffic
// (Qwen3.5-0.8B: 1 MB a row and delta-net layer). float32 throughout; plain loops the compiler vectorises. As the
// torch step: a decay below e^-60 is 0 (deltanet.LOG_TINY), and denormal results are flushed to 0 while it runs.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace {

// S (n, H, Dk, Dv) contiguous, updated in place; q, k (n, H, Dk); v (n, H, Dv); g, beta (n, H); all float32.
// Returns o (n, H, Dv) float32.
torch::Tensor recurrent_step(torch::Tensor S, torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor g,
                             torch::Tensor beta) {
  TORCH_CHECK(S.is_contiguous(), "a contiguous state (it is updated in place)");
  q = q.contiguous(), k = k.contiguous(), v = v.contiguous(), g = g.contiguous(), beta = beta.contiguous();
  for (const auto* x : {&S, &q, &k, &v, &g, &beta}) TORCH_CHECK(x->scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(S.dim() == 4 && q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3, "S (n, H, Dk, Dv), q/k/v 3-d");
  const int64_t rows = S.size(0) * S.size(1), Dk = S.size(2), Dv = S.size(3);
  TORCH_CHECK(q.numel() == rows * Dk && v.numel() == rows * Dv && g.numel() == rows && beta.numel() == rows,
              "q, k (n, H, Dk), v (n, H, Dv), g and beta (n, H) for S (n, H, Dk, Dv)");
  auto out = torch::empty_like(v);
  float* SS = S.data_ptr<float>();
  const float *Q = q.data_ptr<float>(), *K = k.data_ptr<float>(), *V = v.data_ptr<float>();
  const float *G = g.data_ptr<float>(), *Beta = beta.data_ptr<float>();
  float* O = out.data_ptr<float>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
#if defined(__SSE__)
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);  // flush denormal results to zero, and read denormal inputs as zero
#endif
    std::vector<float> kv_buf(Dv), qs_buf(Dv), delta_buf(Dv);
    float* __restrict kv = kv_buf.data();
    float* __restrict qs = qs_buf.data();
    float* __restrict delta = delta_buf.data();
    for (int64_t i = begin; i < end; ++i) {
      float* __restrict s = SS + i * Dk * Dv;
      const float* __restrict qi = Q + i * Dk;
      const float* __restrict ki = K + i * Dk;
      const float* __restrict vi = V + i * Dv;
      float* __restrict o = O + i * Dv;
      float qk = 0.f;
      for (int64_t d = 0; d < Dv; ++d) kv[d] = qs[d] = 0.f;
      for (int64_t r = 0; r < Dk; ++r) {
        const float* __restrict row = s + r * Dv;
        const float kr = ki[r], qr = qi[r];
        qk += qr * kr;
        for (int64_t d = 0; d < Dv; ++d) {
          kv[d] += row[d] * kr;
          qs[d] += row[d] * qr;
        }
      }
      const float a = G[i] < -60.f ? 0.f : std::exp(G[i]), b = Beta[i];
      for (int64_t d = 0; d < Dv; ++d) {
        delta[d] = (vi[d] - a * kv[d]) * b;
        o[d] = a * qs[d] + qk * delta[d];
      }
      for (int64_t r = 0; r < Dk; ++r) {
        float* __restrict row = s + r * Dv;
        const float kr = ki[r];
        for (int64_t d = 0; d < Dv; ++d) row[d] = a * row[d] + kr * delta[d];
      }
    }
#if defined(__SSE__)
    _mm_setcsr(csr);
#endif
  });
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("recurrent_step", &recurrent_step, "one decode step of the gated delta rule, float32, the state in place");
}
