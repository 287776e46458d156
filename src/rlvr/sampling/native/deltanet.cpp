// A decode step of the fast sampler's Qwen3.5 delta-net layers (rlvr.sampling.deltanet, rlvr.sampling.qwen3_5):
// - recurrent_step: the gated delta rule's step (deltanet.recurrent_step's contract);
// - delta_step: a layer's whole token mixer from its input projection to the gated norm's output (the convolution's
//   step and silu, q and k L2-normalised, the decay and beta, the rule, the gated RMSNorm), with the compute dtype's
//   roundings where transformers' layer has them, in two parallel passes where the torch ops took about forty: under
//   contention for the cores each of those waited for its descheduled partner thread.
//
// The rule: per row and value head, the float32 state S (Dk x Dv) is read once for both products it is needed in
// (k^T S and q^T S), then updated in place while it is still in the core's cache:
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
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace {

using bf16 = uint16_t;  // bf16 as its raw bits (the conversions as decode.cpp's: round to nearest even, as torch's)

inline float to_float(bf16 x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float to_float(float x) { return x; }
inline float round_to(float f, bf16) {  // f rounded to bf16, as a float
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return f;
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float round_to(float f, float) { return f; }
inline void store(bf16* p, float f) {
  const float r = round_to(f, bf16{});
  uint32_t u;
  std::memcpy(&u, &r, sizeof u);
  *p = static_cast<bf16>(u >> 16);
}
inline void store(float* p, float f) { *p = f; }
inline float silu(float x) { return x / (1.f + std::exp(-x)); }
inline float decay(float g) { return g < -60.f ? 0.f : std::exp(g); }  // deltanet.LOG_TINY

struct FlushDenormals {  // denormal results to zero and denormal inputs read as zero, on this thread while in scope
#if defined(__SSE__)
  unsigned int csr = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(csr | 0x8040); }
  ~FlushDenormals() { _mm_setcsr(csr); }
#endif
};

// One (row, value head): S (Dk, Dv) in place; q, k (Dk), v (Dv) float32; o (Dv) out. kv, qs, delta: Dv scratch.
inline void rule(float* __restrict s, const float* __restrict qi, const float* __restrict ki,
                 const float* __restrict vi, float a, float b, float* __restrict o, int64_t Dk, int64_t Dv,
                 float* __restrict kv, float* __restrict qs, float* __restrict delta) {
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
    FlushDenormals flush;
    std::vector<float> scratch(3 * Dv);
    for (int64_t i = begin; i < end; ++i)
      rule(SS + i * Dk * Dv, Q + i * Dk, K + i * Dk, V + i * Dv, decay(G[i]), Beta[i], O + i * Dv, Dk, Dv,
           scratch.data(), scratch.data() + Dv, scratch.data() + 2 * Dv);
  });
  return out;
}

// One delta-net layer's token mixer for n decode rows, in the compute dtype T (bf16 or float32):
// proj (n, >= C + Vd + 2 Hv): in_proj_qkv | z | b | a outputs; conv_state (n, K - 1, C) in T, the rows' last inputs,
// updated; conv_w (K, C), A, dt_bias (Hv), norm_w (Dv) float32; S (n, Hv, Dk, Dv) float32, updated.
// Returns (n, Hv Dv) in T: what rlvr.sampling.qwen3_5's torch path computes (conv_step, heads, decay_and_beta,
// recurrent_step, gated_norm), up to float32 rounding.
template <typename T>
torch::Tensor delta_step_impl(const torch::Tensor& proj, torch::Tensor& conv_state, const torch::Tensor& conv_w,
                              const torch::Tensor& A, const torch::Tensor& dt_bias, const torch::Tensor& norm_w,
                              torch::Tensor& S, int64_t Hk, double eps) {
  const int64_t n = S.size(0), Hv = S.size(1), Dk = S.size(2), Dv = S.size(3);
  const int64_t K = conv_w.size(0), C = conv_w.size(1), kd = Hk * Dk, Vd = Hv * Dv, rep = Hv / Hk;
  TORCH_CHECK(C == 2 * kd + Vd && proj.size(1) >= C + Vd + 2 * Hv, "proj's columns: q | k | v | z | b | a");
  TORCH_CHECK(conv_state.size(0) == n && conv_state.size(1) == K - 1 && conv_state.size(2) == C, "conv_state");
  const int64_t ldp = proj.stride(0);
  const T* P = reinterpret_cast<const T*>(proj.data_ptr());
  T* CS = reinterpret_cast<T*>(conv_state.data_ptr());
  const float *W = conv_w.data_ptr<float>(), *AA = A.data_ptr<float>(), *DT = dt_bias.data_ptr<float>();
  const float* NW = norm_w.data_ptr<float>();
  float* SS = S.data_ptr<float>();
  auto mixed = torch::empty({n, C}, proj.options().dtype(at::kFloat));  // q | k | v after the conv, as floats
  auto gb = torch::empty({n, Hv, 2}, mixed.options());                  // (g, beta) per row and value head
  float *M = mixed.data_ptr<float>(), *GB = gb.data_ptr<float>();
  const float scale = 1.f / std::sqrt(static_cast<float>(Dk));
  // pass 1, per row: the convolution's step (rounded to T, then silu rounded to T), q and k normalised, g and beta
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = P + r * ldp;
      T* st = CS + r * (K - 1) * C;
      float* m = M + r * C;
      for (int64_t c = 0; c < C; ++c) {
        float y = 0.f;
        for (int64_t j = 0; j < K - 1; ++j) y += to_float(st[j * C + c]) * W[j * C + c];
        y += to_float(x[c]) * W[(K - 1) * C + c];
        m[c] = round_to(silu(round_to(y, T{})), T{});
      }
      if (K > 1) {  // the state moves up by one input
        std::memmove(st, st + C, (K - 2) * C * sizeof(T));
        std::memcpy(st + (K - 2) * C, x, C * sizeof(T));
      }
      for (int64_t h = 0; h < 2 * Hk; ++h) {  // q heads, then k heads: L2-normalised; q times Dk^-1/2
        float* u = m + h * Dk;
        float ss = 0.f;
        for (int64_t d = 0; d < Dk; ++d) ss += u[d] * u[d];
        const float inv = 1.f / std::sqrt(ss + 1e-6f);
        for (int64_t d = 0; d < Dk; ++d) u[d] *= inv;
        if (h < Hk)
          for (int64_t d = 0; d < Dk; ++d) u[d] *= scale;
      }
      const T* b = x + C + Vd;
      const T* a = b + Hv;
      for (int64_t h = 0; h < Hv; ++h) {
        const float z = to_float(a[h]) + DT[h];
        GB[(r * Hv + h) * 2] = AA[h] * (z > 20.f ? z : std::log1p(std::exp(z)));  // softplus, torch's threshold
        GB[(r * Hv + h) * 2 + 1] = round_to(1.f / (1.f + std::exp(-to_float(b[h]))), T{});
      }
    }
  });
  auto out = torch::empty({n, Vd}, proj.options());
  T* O = reinterpret_cast<T*>(out.data_ptr());
  // pass 2, per row and value head: the rule, then the gated RMSNorm
  at::parallel_for(0, n * Hv, 1, [&](int64_t begin, int64_t end) {
    FlushDenormals flush;
    std::vector<float> scratch(4 * Dv);
    float* o = scratch.data() + 3 * Dv;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = i / Hv, h = i % Hv, hk = h / rep;
      const float* m = M + r * C;
      rule(SS + i * Dk * Dv, m + hk * Dk, m + kd + hk * Dk, m + 2 * kd + h * Dv, decay(GB[i * 2]), GB[i * 2 + 1], o,
           Dk, Dv, scratch.data(), scratch.data() + Dv, scratch.data() + 2 * Dv);
      float ss = 0.f;
      for (int64_t d = 0; d < Dv; ++d) {
        o[d] = round_to(o[d], T{});  // handed over in T, as the reference kernels return it
        ss += o[d] * o[d];
      }
      const float inv = 1.f / std::sqrt(ss / static_cast<float>(Dv) + static_cast<float>(eps));
      const T* z = P + r * ldp + C + h * Dv;
      T* dst = O + r * Vd + h * Dv;
      for (int64_t d = 0; d < Dv; ++d) store(dst + d, NW[d] * round_to(o[d] * inv, T{}) * silu(to_float(z[d])));
    }
  });
  return out;
}

torch::Tensor delta_step(torch::Tensor proj, torch::Tensor conv_state, torch::Tensor conv_w, torch::Tensor A,
                         torch::Tensor dt_bias, torch::Tensor norm_w, torch::Tensor S, int64_t Hk, double eps) {
  TORCH_CHECK(proj.dim() == 2 && proj.stride(1) == 1, "proj (n, columns) with unit column stride");
  TORCH_CHECK(conv_state.is_contiguous() && S.is_contiguous(), "contiguous states (updated in place)");
  TORCH_CHECK(conv_state.scalar_type() == proj.scalar_type(), "conv_state in the compute dtype");
  for (const auto* x : {&conv_w, &A, &dt_bias, &norm_w, &S})
    TORCH_CHECK(x->scalar_type() == at::kFloat && x->is_contiguous(), "float32 weights and state, contiguous");
  if (proj.scalar_type() == at::kBFloat16)
    return delta_step_impl<bf16>(proj, conv_state, conv_w, A, dt_bias, norm_w, S, Hk, eps);
  TORCH_CHECK(proj.scalar_type() == at::kFloat, "bf16 or float32 only");
  return delta_step_impl<float>(proj, conv_state, conv_w, A, dt_bias, norm_w, S, Hk, eps);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("recurrent_step", &recurrent_step, "one decode step of the gated delta rule, float32, the state in place");
  m.def("delta_step", &delta_step, "one decode step of a delta-net layer's token mixer (bf16 or float32)");
}
