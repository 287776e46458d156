// Fused ops of the fast sampler's bf16 forward, each replacing several small torch ops whose fixed costs (not their
// arithmetic) made up most of a decode step above its weight matmuls:
// - decode_attend: one decode step's attention for a layer: the new keys/values go into the generated cache, and
//   every active row attends to its prompt's shared keys and its own generated keys under one float32 softmax;
// - rms_norm_bf16: RMSNorm of the float32 residual stream, rounded once to bf16 (the next matmul's input);
// - rope_bf16: the rotary embedding of q and k straight from the bf16 qkv matmul output, in float32, rounded once;
// - silu_mul_bf16: silu(gate) * up of the fused gate|up matmul output, in float32, rounded once.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

inline float bf16_to_float(uint16_t x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {  // round to nearest even, as torch's conversion
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

#ifdef __AVX512F__
inline __m512 load_bf16x16(const uint16_t* p) {  // 16 bf16 -> 16 float32 (exact: a shift)
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif

// in place: x[j] = exp(x[j] - max x) for j < len; returns their sum
inline float exp_shifted_sum(float* x, int64_t len) {
  float top = x[0];
  for (int64_t j = 1; j < len; ++j) top = x[j] > top ? x[j] : top;
#ifdef __AVX512F__
  // exp by range reduction to r in [-ln2/2, ln2/2] and the Cephes expf polynomial (about 1 ulp in float32)
  const __m512 vtop = _mm512_set1_ps(top), log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  const __m512 lowest = _mm512_set1_ps(-87.3f), one = _mm512_set1_ps(1.f);
  __m512 total = _mm512_setzero_ps();
  for (int64_t j = 0; j < len; j += 16) {
    const __mmask16 m = len - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (len - j)) - 1);
    __m512 v = _mm512_max_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vtop), lowest);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, ln2_hi, v);
    r = _mm512_fnmadd_ps(k, ln2_lo, r);
    __m512 poly = _mm512_set1_ps(1.9875691500e-4f);
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.3981999507e-3f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(8.3334519073e-3f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(4.1665795894e-2f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.6666665459e-1f));
    poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(5.0000001201e-1f));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(poly, r), r, r), one);
    const __m512 e = _mm512_scalef_ps(y, k);
    _mm512_mask_storeu_ps(x + j, m, e);
    total = _mm512_add_ps(total, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(total);
#else
  float sum = 0.f;
  for (int64_t j = 0; j < len; ++j) { x[j] = std::exp(x[j] - top); sum += x[j]; }
  return sum;
#endif
}

// scores[e * stride] = q_e . key for the rep queries (float32, D of them each), key in bf16
inline void dot_rep(const float* qf, int64_t rep, int64_t D, const uint16_t* key, float* scores, int64_t stride) {
#ifdef __AVX512F__
  if (D % 16 == 0 && D <= 256) {
    __m512 kv[16];
    for (int64_t c = 0; c < D / 16; ++c) kv[c] = load_bf16x16(key + 16 * c);
    for (int64_t e = 0; e < rep; ++e) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t c = 0; c < D / 16; ++c) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qf + e * D + 16 * c), kv[c], acc);
      scores[e * stride] = _mm512_reduce_add_ps(acc);
    }
    return;
  }
#endif
  for (int64_t e = 0; e < rep; ++e) {
    float dot = 0.f;
    for (int64_t d = 0; d < D; ++d) dot += qf[e * D + d] * bf16_to_float(key[d]);
    scores[e * stride] = dot;
  }
}

// acc_e += w[e * stride] * value for the rep accumulators (float32, D each), value in bf16
inline void axpy_rep(const float* w, int64_t stride, int64_t rep, int64_t D, const uint16_t* value, float* acc) {
#ifdef __AVX512F__
  if (D % 16 == 0 && D <= 256) {
    for (int64_t c = 0; c < D / 16; ++c) {
      const __m512 v = load_bf16x16(value + 16 * c);
      for (int64_t e = 0; e < rep; ++e) {
        float* a = acc + e * D + 16 * c;
        _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_set1_ps(w[e * stride]), v, _mm512_loadu_ps(a)));
      }
    }
    return;
  }
#endif
  for (int64_t e = 0; e < rep; ++e)
    for (int64_t d = 0; d < D; ++d) acc[e * D + d] += w[e * stride] * bf16_to_float(value[d]);
}

// q (n, Hkv, rep, D) bf16, already scaled; k, v (n, Hkv, D) bf16; pk/pv (P, Hkv, Lmax, D) bf16 (one layer);
// gk/gv (S, Hkv, Tcap, D) bf16 (one layer; written at position t); prompt_of (n,) long; slot_of (n,) long;
// prompt_len (P,) long. Returns (n, Hkv * rep * D) bf16.
torch::Tensor decode_attend(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor pk, torch::Tensor pv,
                            torch::Tensor gk, torch::Tensor gv, torch::Tensor prompt_of, torch::Tensor slot_of,
                            torch::Tensor prompt_len, int64_t t) {
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && pk.scalar_type() == at::kBFloat16, "bf16 only");
  TORCH_CHECK(pk.is_contiguous() && pv.is_contiguous() && gk.is_contiguous() && gv.is_contiguous(),
              "contiguous caches");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(2) == 1 && v.stride(2) == 1, "q, k, v with unit stride over D");
  const int64_t n = q.size(0), Hkv = q.size(1), rep = q.size(2), D = q.size(3);
  const int64_t Lmax = pk.size(2), Tcap = gk.size(2);
  TORCH_CHECK(t < Tcap, "generated cache too short");
  TORCH_CHECK(rep <= 64, "at most 64 query heads per key/value head");
  const int64_t qs0 = q.stride(0), qs1 = q.stride(1), qs2 = q.stride(2);  // q, k, v are views of the qkv matmul
  const int64_t ks0 = k.stride(0), ks1 = k.stride(1), vs0 = v.stride(0), vs1 = v.stride(1);
  auto out = torch::empty({n, Hkv * rep * D}, q.options());
  const auto* Q = reinterpret_cast<const uint16_t*>(q.data_ptr());
  const auto* K = reinterpret_cast<const uint16_t*>(k.data_ptr());
  const auto* V = reinterpret_cast<const uint16_t*>(v.data_ptr());
  const auto* PK = reinterpret_cast<const uint16_t*>(pk.data_ptr());
  const auto* PV = reinterpret_cast<const uint16_t*>(pv.data_ptr());
  auto* GK = reinterpret_cast<uint16_t*>(gk.data_ptr());
  auto* GV = reinterpret_cast<uint16_t*>(gv.data_ptr());
  auto* O = reinterpret_cast<uint16_t*>(out.data_ptr());
  const auto* prompt = prompt_of.data_ptr<int64_t>();
  const auto* slot = slot_of.data_ptr<int64_t>();
  const auto* plen = prompt_len.data_ptr<int64_t>();

  at::parallel_for(0, n * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(rep * D), acc(rep * D), scores;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / Hkv, h = task % Hkv, p = prompt[r], s = slot[r], L = plen[p];
      uint16_t* gk_row = GK + ((s * Hkv + h) * Tcap) * D;
      uint16_t* gv_row = GV + ((s * Hkv + h) * Tcap) * D;
      std::memcpy(gk_row + t * D, K + r * ks0 + h * ks1, D * sizeof(uint16_t));
      std::memcpy(gv_row + t * D, V + r * vs0 + h * vs1, D * sizeof(uint16_t));
      for (int64_t e = 0; e < rep; ++e)
        for (int64_t d = 0; d < D; ++d) qf[e * D + d] = bf16_to_float(Q[r * qs0 + h * qs1 + e * qs2 + d]);
      const int64_t keys = L + t + 1;
      scores.assign(rep * keys, 0.f);
      const uint16_t* pk_rows = PK + ((p * Hkv + h) * Lmax) * D;
      const uint16_t* pv_rows = PV + ((p * Hkv + h) * Lmax) * D;
      for (int64_t j = 0; j < keys; ++j)  // scores: every key once, dotted with the rep queries of this head
        dot_rep(qf.data(), rep, D, j < L ? pk_rows + j * D : gk_row + (j - L) * D, scores.data() + j, keys);
      float total[64];  // softmax weights, unnormalised, and their sums
      for (int64_t e = 0; e < rep; ++e) total[e] = exp_shifted_sum(scores.data() + e * keys, keys);
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = 0; j < keys; ++j)  // weighted values
        axpy_rep(scores.data() + j, keys, rep, D, j < L ? pv_rows + j * D : gv_row + (j - L) * D, acc.data());
      uint16_t* orow = O + r * Hkv * rep * D + h * rep * D;
      for (int64_t e = 0; e < rep; ++e)
        for (int64_t d = 0; d < D; ++d) orow[e * D + d] = float_to_bf16(acc[e * D + d] / total[e]);
    }
  });
  return out;
}

// x (N, H) float32, w (H,) float32 -> (N, H) bf16: x / sqrt(mean(x^2) + eps) * w
torch::Tensor rms_norm_bf16(torch::Tensor x, torch::Tensor w, double eps) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && x.dim() == 2, "float32 (N, H)");
  auto xc = x.contiguous();
  const int64_t N = xc.size(0), H = xc.size(1);
  auto out = torch::empty({N, H}, xc.options().dtype(at::kBFloat16));
  auto wc = w.contiguous();  // held: a temporary's data would be freed at the end of the statement
  const float* X = xc.data_ptr<float>();
  const float* W = wc.data_ptr<float>();
  auto* O = reinterpret_cast<uint16_t*>(out.data_ptr());
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = X + r * H;
      double ss = 0.0;  // double: the same mean whatever the summation order
      for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / H + eps));
      for (int64_t i = 0; i < H; ++i) O[r * H + i] = float_to_bf16(xr[i] * inv * W[i]);
    }
  });
  return out;
}

// qkv (N, >= heads * D) bf16, its first heads * D columns q|k with each head's pairs interleaved; rot (N, heads, D/2)
// complex64 -> (N, heads, D) bf16: each pair (a, b) times rot as a complex number
torch::Tensor rope_bf16(torch::Tensor qkv, torch::Tensor rot) {
  TORCH_CHECK(qkv.scalar_type() == at::kBFloat16 && rot.scalar_type() == at::kComplexFloat, "bf16 qkv, complex64 rot");
  TORCH_CHECK(qkv.stride(1) == 1 && rot.is_contiguous(), "qkv rows with unit stride, contiguous rot");
  const int64_t N = rot.size(0), heads = rot.size(1), half = rot.size(2), D = 2 * half;
  TORCH_CHECK(qkv.size(0) == N && qkv.size(1) >= heads * D, "qkv narrower than the rotated heads");
  auto out = torch::empty({N, heads, D}, qkv.options());
  const auto* Q = reinterpret_cast<const uint16_t*>(qkv.data_ptr());
  const float* R = reinterpret_cast<const float*>(rot.data_ptr());  // (re, im) pairs
  auto* O = reinterpret_cast<uint16_t*>(out.data_ptr());
  const int64_t qs = qkv.stride(0);
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t j = 0; j < heads * half; ++j) {
        const float a = bf16_to_float(Q[r * qs + 2 * j]), b = bf16_to_float(Q[r * qs + 2 * j + 1]);
        const float c = R[(r * heads * half + j) * 2], s = R[(r * heads * half + j) * 2 + 1];
        O[r * heads * D + 2 * j] = float_to_bf16(a * c - b * s);
        O[r * heads * D + 2 * j + 1] = float_to_bf16(a * s + b * c);
      }
  });
  return out;
}

// gu (N, 2 I) bf16, gate columns then up columns -> (N, I) bf16: silu(gate) * up
torch::Tensor silu_mul_bf16(torch::Tensor gu) {
  TORCH_CHECK(gu.scalar_type() == at::kBFloat16 && gu.dim() == 2 && gu.size(1) % 2 == 0, "bf16 (N, 2 I)");
  auto g = gu.contiguous();
  const int64_t N = g.size(0), I = g.size(1) / 2;
  auto out = torch::empty({N, I}, g.options());
  const auto* G = reinterpret_cast<const uint16_t*>(g.data_ptr());
  auto* O = reinterpret_cast<uint16_t*>(out.data_ptr());
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < I; ++i) {
        const float x = bf16_to_float(G[r * 2 * I + i]), u = bf16_to_float(G[r * 2 * I + I + i]);
        O[r * I + i] = float_to_bf16(x / (1.f + std::exp(-x)) * u);
      }
  });
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attend", &decode_attend, "one decode step's cascade attention for one layer (bf16)");
  m.def("rms_norm_bf16", &rms_norm_bf16, "RMSNorm of a float32 stream, rounded once to bf16");
  m.def("rope_bf16", &rope_bf16, "rotary embedding of the q|k heads of a bf16 qkv output");
  m.def("silu_mul_bf16", &silu_mul_bf16, "silu(gate) * up of a bf16 gate|up output");
}
