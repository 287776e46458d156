// Fused ops of the fast sampler's decode step, each replacing several small torch ops whose fixed costs (not their
// arithmetic) made up most of a decode step above its weight matmuls. Each takes the compute dtype's tensors, bf16
// or float32 (one template, T the element: bf16 as its raw bits), and computes in float32:
// - decode_attend: one decode step's attention for a layer: the new keys/values go into the generated cache, and
//   every active row attends to its prompt's shared keys and its own generated keys under one float32 softmax (in a
//   sliding window, the last `window` of them);
// - rms_norm: RMSNorm of the float32 residual stream, rounded once to the compute dtype (the next matmul's input);
// - rope: the rotary embedding of q and k straight from the qkv matmul output, in float32, rounded once;
// - head_norm_rope: a per-head RMSNorm of q and k (Qwen3's q_norm, k_norm; Gemma 3's), then rope, from the qkv output;
// - silu_mul: silu(gate) * up of the fused gate|up matmul output, in float32, rounded once;
// - gelu_tanh_mul: gelu_tanh(gate) * up (Gemma 3's MLP), rounded where the trainer's bf16 forward rounds.
// Vector paths for AVX512 (16 lanes) and AVX2 with FMA (8 lanes: the machines where `auto` samples in float32).
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

using bf16 = uint16_t;  // bf16 as its raw bits

inline float bf16_to_float(bf16 x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16 float_to_bf16(float f) {  // round to nearest even, as torch's conversion
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<bf16>(u >> 16);
}

inline float to_float(bf16 x) { return bf16_to_float(x); }
inline float to_float(float x) { return x; }
template <typename T> inline T from_float(float f);
template <> inline bf16 from_float<bf16>(float f) { return float_to_bf16(f); }
template <> inline float from_float<float>(float f) { return f; }

// One float32 vector of the widest kind compiled for, with the operations dot_rep, axpy_rep, vexp and silu need, so
// the code below the two sets is written once for both.
#if defined(__AVX512F__)
constexpr int64_t LANES = 16;
using vecf = __m512;
inline vecf vload(const bf16* p) {  // 16 bf16 -> 16 float32 (exact: a shift)
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline vecf vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, vecf v) { _mm512_storeu_ps(p, v); }
inline vecf vset(float x) { return _mm512_set1_ps(x); }
inline vecf vzero() { return _mm512_setzero_ps(); }
inline vecf vfma(vecf a, vecf b, vecf c) { return _mm512_fmadd_ps(a, b, c); }
inline vecf vadd(vecf a, vecf b) { return _mm512_add_ps(a, b); }
inline vecf vsub(vecf a, vecf b) { return _mm512_sub_ps(a, b); }
inline vecf vmul(vecf a, vecf b) { return _mm512_mul_ps(a, b); }
inline vecf vdiv(vecf a, vecf b) { return _mm512_div_ps(a, b); }
inline vecf vclamp(vecf v, float lo, float hi) { return _mm512_min_ps(_mm512_max_ps(v, vset(lo)), vset(hi)); }
inline vecf vround(vecf v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vecf vscale2(vecf y, vecf k) { return _mm512_scalef_ps(y, k); }  // y 2^k, k integral
inline float vsum(vecf v) { return _mm512_reduce_add_ps(v); }
#define RLVR_VEC 1
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int64_t LANES = 8;
using vecf = __m256;
inline vecf vload(const bf16* p) {  // 8 bf16 -> 8 float32
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline vecf vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, vecf v) { _mm256_storeu_ps(p, v); }
inline vecf vset(float x) { return _mm256_set1_ps(x); }
inline vecf vzero() { return _mm256_setzero_ps(); }
inline vecf vfma(vecf a, vecf b, vecf c) { return _mm256_fmadd_ps(a, b, c); }
inline vecf vadd(vecf a, vecf b) { return _mm256_add_ps(a, b); }
inline vecf vsub(vecf a, vecf b) { return _mm256_sub_ps(a, b); }
inline vecf vmul(vecf a, vecf b) { return _mm256_mul_ps(a, b); }
inline vecf vdiv(vecf a, vecf b) { return _mm256_div_ps(a, b); }
inline vecf vclamp(vecf v, float lo, float hi) { return _mm256_min_ps(_mm256_max_ps(v, vset(lo)), vset(hi)); }
inline vecf vround(vecf v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vecf vscale2(vecf y, vecf k) {  // y 2^k, k integral in [-126, 127]: 2^k by its exponent bits, exact like scalef
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
inline float vsum(vecf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#define RLVR_VEC 1
#endif

#ifdef RLVR_VEC
// exp(v) for v in [-87.3, 88.3] (clamped): range reduction to r in [-ln2/2, ln2/2] and the Cephes expf polynomial
// (about 1 ulp in float32)
inline vecf vexp(vecf v) {
  v = vclamp(v, -87.3f, 88.3f);
  const vecf k = vround(vmul(v, vset(1.44269504088896341f)));
  vecf r = vfma(k, vset(-0.693359375f), v);
  r = vfma(k, vset(2.12194440e-4f), r);
  vecf poly = vset(1.9875691500e-4f);
  poly = vfma(poly, r, vset(1.3981999507e-3f));
  poly = vfma(poly, r, vset(8.3334519073e-3f));
  poly = vfma(poly, r, vset(4.1665795894e-2f));
  poly = vfma(poly, r, vset(1.6666665459e-1f));
  poly = vfma(poly, r, vset(5.0000001201e-1f));
  return vscale2(vadd(vfma(vmul(poly, r), r, r), vset(1.f)), k);
}
#endif

// in place: x[j] = exp(x[j] - max x) for j < len; returns their sum
inline float exp_shifted_sum(float* x, int64_t len) {
  float top = x[0];
  for (int64_t j = 1; j < len; ++j) top = x[j] > top ? x[j] : top;
  int64_t j = 0;
  float sum = 0.f;
#if defined(__AVX512F__)
  const vecf vtop = vset(top);
  vecf total = vzero();
  for (; j < len; j += 16) {  // the tail masked
    const __mmask16 m = len - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (len - j)) - 1);
    const vecf e = vexp(vsub(_mm512_maskz_loadu_ps(m, x + j), vtop));
    _mm512_mask_storeu_ps(x + j, m, e);
    total = vadd(total, _mm512_maskz_mov_ps(m, e));
  }
  sum = vsum(total);
#elif defined(RLVR_VEC)
  const vecf vtop = vset(top);
  vecf total = vzero();
  for (; j + LANES <= len; j += LANES) {
    const vecf e = vexp(vsub(vload(x + j), vtop));
    vstore(x + j, e);
    total = vadd(total, e);
  }
  sum = vsum(total);
#endif
  for (; j < len; ++j) { x[j] = std::exp(x[j] - top); sum += x[j]; }  // the scalar tail (all of it unvectorised)
  return sum;
}

// scores[e * stride] = q_e . key for the rep queries (float32, D of them each)
template <typename T>
inline void dot_rep(const float* qf, int64_t rep, int64_t D, const T* key, float* scores, int64_t stride) {
#ifdef RLVR_VEC
  if (D % LANES == 0 && D <= 32 * LANES) {
    vecf kv[32];
    for (int64_t c = 0; c < D / LANES; ++c) kv[c] = vload(key + LANES * c);
    for (int64_t e = 0; e < rep; ++e) {
      vecf acc = vzero();
      for (int64_t c = 0; c < D / LANES; ++c) acc = vfma(vload(qf + e * D + LANES * c), kv[c], acc);
      scores[e * stride] = vsum(acc);
    }
    return;
  }
#endif
  for (int64_t e = 0; e < rep; ++e) {
    float dot = 0.f;
    for (int64_t d = 0; d < D; ++d) dot += qf[e * D + d] * to_float(key[d]);
    scores[e * stride] = dot;
  }
}

// acc_e += w[e * stride] * value for the rep accumulators (float32, D each)
template <typename T>
inline void axpy_rep(const float* w, int64_t stride, int64_t rep, int64_t D, const T* value, float* acc) {
#ifdef RLVR_VEC
  if (D % LANES == 0) {
    for (int64_t c = 0; c < D / LANES; ++c) {
      const vecf v = vload(value + LANES * c);
      for (int64_t e = 0; e < rep; ++e) {
        float* a = acc + e * D + LANES * c;
        vstore(a, vfma(vset(w[e * stride]), v, vload(a)));
      }
    }
    return;
  }
#endif
  for (int64_t e = 0; e < rep; ++e)
    for (int64_t d = 0; d < D; ++d) acc[e * D + d] += w[e * stride] * to_float(value[d]);
}

template <typename T> constexpr at::ScalarType dtype_of() {
  return std::is_same<T, float>::value ? at::kFloat : at::kBFloat16;
}

// The entry points' one dispatch: f called with a value of t's element type (bf16 or float32), f(bf16{}) or f(0.f)
template <typename F>
auto by_element(const torch::Tensor& t, const char* what, F&& f) {
  if (t.scalar_type() == at::kBFloat16) return f(bf16{});
  TORCH_CHECK(t.scalar_type() == at::kFloat, what, " in bf16 or float32 only");
  return f(0.f);
}

// q (n, Hkv, rep, D), already scaled; k, v (n, Hkv, D); pk/pv (P, Hkv, Lmax, D) (one layer); gk/gv (S, Hkv, Tcap, D)
// (one layer; written at position t); all in the compute dtype T; prompt_of (n,) long; slot_of (n,) long;
// prompt_len (P,) long; window > 0: a sliding window, the query (position L + t) sees the last `window` keys (of
// positions L + t + 1 - window .. L + t), 0: all. Returns (n, Hkv * rep * D) in T.
template <typename T>
torch::Tensor attend_impl(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor pk, torch::Tensor pv,
                          torch::Tensor gk, torch::Tensor gv, torch::Tensor prompt_of, torch::Tensor slot_of,
                          torch::Tensor prompt_len, int64_t t, int64_t window) {
  for (const auto* x : {&k, &v, &pk, &pv, &gk, &gv})
    TORCH_CHECK(x->scalar_type() == dtype_of<T>(), "q, k, v and the caches in one dtype");
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
  const auto* Q = reinterpret_cast<const T*>(q.data_ptr());
  const auto* K = reinterpret_cast<const T*>(k.data_ptr());
  const auto* V = reinterpret_cast<const T*>(v.data_ptr());
  const auto* PK = reinterpret_cast<const T*>(pk.data_ptr());
  const auto* PV = reinterpret_cast<const T*>(pv.data_ptr());
  auto* GK = reinterpret_cast<T*>(gk.data_ptr());
  auto* GV = reinterpret_cast<T*>(gv.data_ptr());
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  const auto* prompt = prompt_of.data_ptr<int64_t>();
  const auto* slot = slot_of.data_ptr<int64_t>();
  const auto* plen = prompt_len.data_ptr<int64_t>();

  at::parallel_for(0, n * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(rep * D), acc(rep * D), scores;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / Hkv, h = task % Hkv, p = prompt[r], s = slot[r], L = plen[p];
      T* gk_row = GK + ((s * Hkv + h) * Tcap) * D;
      T* gv_row = GV + ((s * Hkv + h) * Tcap) * D;
      std::memcpy(gk_row + t * D, K + r * ks0 + h * ks1, D * sizeof(T));
      std::memcpy(gv_row + t * D, V + r * vs0 + h * vs1, D * sizeof(T));
      for (int64_t e = 0; e < rep; ++e)
        for (int64_t d = 0; d < D; ++d) qf[e * D + d] = to_float(Q[r * qs0 + h * qs1 + e * qs2 + d]);
      const int64_t keys = L + t + 1, first = window > 0 && keys > window ? keys - window : 0, seen = keys - first;
      scores.assign(rep * seen, 0.f);
      const T* pk_rows = PK + ((p * Hkv + h) * Lmax) * D;
      const T* pv_rows = PV + ((p * Hkv + h) * Lmax) * D;
      for (int64_t j = first; j < keys; ++j)  // scores: every key seen once, dotted with the rep queries of this head
        dot_rep(qf.data(), rep, D, j < L ? pk_rows + j * D : gk_row + (j - L) * D, scores.data() + j - first, seen);
      float total[64];  // softmax weights, unnormalised, and their sums
      for (int64_t e = 0; e < rep; ++e) total[e] = exp_shifted_sum(scores.data() + e * seen, seen);
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t j = first; j < keys; ++j)  // weighted values
        axpy_rep(scores.data() + j - first, seen, rep, D, j < L ? pv_rows + j * D : gv_row + (j - L) * D, acc.data());
      T* orow = O + r * Hkv * rep * D + h * rep * D;
      for (int64_t e = 0; e < rep; ++e)
        for (int64_t d = 0; d < D; ++d) orow[e * D + d] = from_float<T>(acc[e * D + d] / total[e]);
    }
  });
  return out;
}

torch::Tensor decode_attend(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor pk, torch::Tensor pv,
                            torch::Tensor gk, torch::Tensor gv, torch::Tensor prompt_of, torch::Tensor slot_of,
                            torch::Tensor prompt_len, int64_t t, int64_t window) {
  return by_element(q, "q", [&](auto e) {
    return attend_impl<decltype(e)>(q, k, v, pk, pv, gk, gv, prompt_of, slot_of, prompt_len, t, window);
  });
}

// x (N, H) float32, w (H,) float32 -> (N, H) in T: x / sqrt(mean(x^2) + eps) * w
template <typename T>
torch::Tensor rms_norm_impl(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xc = x.contiguous();
  const int64_t N = xc.size(0), H = xc.size(1);
  auto out = torch::empty({N, H}, xc.options().dtype(dtype_of<T>()));
  auto wc = w.contiguous();  // held: a temporary's data would be freed at the end of the statement
  const float* X = xc.data_ptr<float>();
  const float* W = wc.data_ptr<float>();
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = X + r * H;
      double ss = 0.0;  // double: the same mean whatever the summation order
      for (int64_t i = 0; i < H; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / H + eps));
      for (int64_t i = 0; i < H; ++i) O[r * H + i] = from_float<T>(xr[i] * inv * W[i]);
    }
  });
  return out;
}

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps, bool to_bf16) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && x.dim() == 2, "float32 (N, H)");
  return to_bf16 ? rms_norm_impl<bf16>(x, w, eps) : rms_norm_impl<float>(x, w, eps);
}

// qkv (N, >= heads * D) in T, its first heads * D columns q|k with each head's pairs interleaved; rot (N, heads, D/2)
// complex64 -> (N, heads, D) in T: each pair (a, b) times rot as a complex number
template <typename T>
torch::Tensor rope_impl(const torch::Tensor& qkv, const torch::Tensor& rot) {
  const int64_t N = rot.size(0), heads = rot.size(1), half = rot.size(2), D = 2 * half;
  TORCH_CHECK(qkv.size(0) == N && qkv.size(1) >= heads * D, "qkv narrower than the rotated heads");
  auto out = torch::empty({N, heads, D}, qkv.options());
  const auto* Q = reinterpret_cast<const T*>(qkv.data_ptr());
  const float* R = reinterpret_cast<const float*>(rot.data_ptr());  // (re, im) pairs
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  const int64_t qs = qkv.stride(0);
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t j = 0; j < heads * half; ++j) {
        const float a = to_float(Q[r * qs + 2 * j]), b = to_float(Q[r * qs + 2 * j + 1]);
        const float c = R[(r * heads * half + j) * 2], s = R[(r * heads * half + j) * 2 + 1];
        O[r * heads * D + 2 * j] = from_float<T>(a * c - b * s);
        O[r * heads * D + 2 * j + 1] = from_float<T>(a * s + b * c);
      }
  });
  return out;
}

torch::Tensor rope(torch::Tensor qkv, torch::Tensor rot) {
  TORCH_CHECK(rot.scalar_type() == at::kComplexFloat, "complex64 rot");
  TORCH_CHECK(qkv.stride(1) == 1 && rot.is_contiguous(), "qkv rows with unit stride, contiguous rot");
  return by_element(qkv, "qkv", [&](auto e) { return rope_impl<decltype(e)>(qkv, rot); });
}

// qkv (N, >= heads * D) in T, its first heads * D columns q|k as for rope; weight (heads, D) float32, each head's norm
// weight in the pairs' order; rot as for rope -> (N, heads, D) in T. Each head is RMS-normalised in float32 (its
// sum of squares in float32 vector lanes: D is a few dozen, and one chain of double adds a head was 3x slower), rounded to T (transformers rounds the normed value to the projection's dtype,
// before its float32 weight), times its weight, rotated in float32, rounded once to T: the torch path's arithmetic.
// round_last (Gemma 3, whose norm returns (x w).to(dtype)): the normed value times its weight, then rounded to T.
template <typename T>
torch::Tensor head_norm_rope_impl(const torch::Tensor& qkv, const torch::Tensor& weight, const torch::Tensor& rot,
                                  double eps, bool round_last) {
  const int64_t N = rot.size(0), heads = rot.size(1), half = rot.size(2), D = 2 * half;
  TORCH_CHECK(qkv.size(0) == N && qkv.size(1) >= heads * D, "qkv narrower than the rotated heads");
  TORCH_CHECK(weight.size(0) == heads && weight.size(1) == D, "a (heads, D) weight");
  auto out = torch::empty({N, heads, D}, qkv.options());
  auto wc = weight.contiguous();
  const auto* Q = reinterpret_cast<const T*>(qkv.data_ptr());
  const float* W = wc.data_ptr<float>();
  const float* R = reinterpret_cast<const float*>(rot.data_ptr());  // (re, im) pairs
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  const int64_t qs = qkv.stride(0);
  at::parallel_for(0, N * heads, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> h(D);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / heads, hd = task % heads;
      const T* x = Q + r * qs + hd * D;
      int64_t d = 0;
      float ss = 0.f;
#ifdef RLVR_VEC
      vecf acc = vzero();
      for (; d + LANES <= D; d += LANES) {
        const vecf v = vload(x + d);
        vstore(h.data() + d, v);
        acc = vfma(v, v, acc);
      }
      ss = vsum(acc);
#endif
      for (; d < D; ++d) {
        h[d] = to_float(x[d]);
        ss += h[d] * h[d];
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ss) / D + eps));
      const float* w = W + hd * D;
      if (round_last)
        for (d = 0; d < D; ++d) h[d] = to_float(from_float<T>(h[d] * inv * w[d]));
      else
        for (d = 0; d < D; ++d) h[d] = to_float(from_float<T>(h[d] * inv)) * w[d];
      const float* rr = R + task * half * 2;
      T* o = O + task * D;
      for (int64_t j = 0; j < half; ++j) {
        const float a = h[2 * j], b = h[2 * j + 1], c = rr[2 * j], s = rr[2 * j + 1];
        o[2 * j] = from_float<T>(a * c - b * s);
        o[2 * j + 1] = from_float<T>(a * s + b * c);
      }
    }
  });
  return out;
}

torch::Tensor head_norm_rope(torch::Tensor qkv, torch::Tensor weight, torch::Tensor rot, double eps, bool round_last) {
  TORCH_CHECK(rot.scalar_type() == at::kComplexFloat && weight.scalar_type() == at::kFloat, "complex64 rot, float32 weight");
  TORCH_CHECK(qkv.stride(1) == 1 && rot.is_contiguous(), "qkv rows with unit stride, contiguous rot");
  return by_element(qkv, "qkv", [&](auto e) {
    return head_norm_rope_impl<decltype(e)>(qkv, weight, rot, eps, round_last);
  });
}

// gu (N, 2 I) in T, gate columns then up columns -> (N, I) in T: silu(gate) * up. float32 takes the vector exp
// (about 1 ulp); bf16 keeps std::exp, so its results stay bit for bit what they were before float32 came here.
template <typename T>
torch::Tensor silu_mul_impl(const torch::Tensor& gu) {
  auto g = gu.contiguous();
  const int64_t N = g.size(0), I = g.size(1) / 2;
  auto out = torch::empty({N, I}, g.options());
  const auto* G = reinterpret_cast<const T*>(g.data_ptr());
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* gate = G + r * 2 * I;
      const T* up = gate + I;
      T* o = O + r * I;
      int64_t i = 0;
#ifdef RLVR_VEC
      if constexpr (std::is_same<T, float>::value) {
        const vecf one = vset(1.f), zero = vzero();
        for (; i + LANES <= I; i += LANES) {
          const vecf x = vload(gate + i);
          vstore(o + i, vmul(vdiv(x, vadd(one, vexp(vsub(zero, x)))), vload(up + i)));
        }
      }
#endif
      for (; i < I; ++i) {
        const float x = to_float(gate[i]), u = to_float(up[i]);
        o[i] = from_float<T>(x / (1.f + std::exp(-x)) * u);
      }
    }
  });
  return out;
}

torch::Tensor silu_mul(torch::Tensor gu) {
  TORCH_CHECK(gu.dim() == 2 && gu.size(1) % 2 == 0, "(N, 2 I)");
  return by_element(gu, "gate|up", [&](auto e) { return silu_mul_impl<decltype(e)>(gu); });
}

// gu (N, 2 I) in T, gate columns then up columns -> (N, I) in T: gelu_tanh(gate) * up, with gelu_tanh(x) =
// 0.5 x (1 + tanh(y)) = x / (1 + exp(-2 y)), y = sqrt(2 / pi) (x + 0.044715 x^3), in float32 (the vector exp: about
// 1 ulp). As transformers' MLP computes it in T: the activation rounded to T, then the product rounded (float32:
// neither rounds).
template <typename T>
torch::Tensor gelu_tanh_mul_impl(const torch::Tensor& gu) {
  auto g = gu.contiguous();
  const int64_t N = g.size(0), I = g.size(1) / 2;
  auto out = torch::empty({N, I}, g.options());
  const auto* G = reinterpret_cast<const T*>(g.data_ptr());
  auto* O = reinterpret_cast<T*>(out.data_ptr());
  constexpr float c2 = -2.f * 0.7978845608028654f, k3 = 0.044715f;  // -2 sqrt(2 / pi)
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* gate = G + r * 2 * I;
      const T* up = gate + I;
      T* o = O + r * I;
      int64_t i = 0;
#ifdef RLVR_VEC
      const vecf one = vset(1.f), vc2 = vset(c2), vk3 = vset(k3);
      float act[LANES];
      for (; i + LANES <= I; i += LANES) {
        const vecf x = vload(gate + i);
        const vecf z = vmul(vc2, vfma(vmul(vk3, x), vmul(x, x), x));  // -2 y
        vstore(act, vdiv(x, vadd(one, vexp(z))));
        for (int64_t l = 0; l < LANES; ++l)
          o[i + l] = from_float<T>(to_float(from_float<T>(act[l])) * to_float(up[i + l]));
      }
#endif
      for (; i < I; ++i) {
        const float x = to_float(gate[i]), a = x / (1.f + std::exp(c2 * (x + k3 * x * x * x)));
        o[i] = from_float<T>(to_float(from_float<T>(a)) * to_float(up[i]));
      }
    }
  });
  return out;
}

torch::Tensor gelu_tanh_mul(torch::Tensor gu) {
  TORCH_CHECK(gu.dim() == 2 && gu.size(1) % 2 == 0, "(N, 2 I)");
  return by_element(gu, "gate|up", [&](auto e) { return gelu_tanh_mul_impl<decltype(e)>(gu); });
}

// The float32 weight matmul of a decode step, y = x W^T (+ b), for the few rows a decode step has, on weights packed
// once at each sync into panels of 16 output columns: wp (N / 16, K, 16), panel p holding W[16p : 16p + 16, :]
// transposed. A microkernel keeps up to 6 rows x 16 columns of y in 12 AVX2 registers and streams its panel once
// from memory for all the rows of a chunk of up to 64 rows (the rest of the chunk's row blocks find it in cache; 64
// is the sampler's most decode rows, so a step streams each weight once, and 64 rows of x fit a core's L2):
// with 8 rows that is one pass over the weights at 8 FMAs per weight loaded, where a general matmul library's few-row
// kernel reads them at half the memory's rate (docs/performance.md, "Decode on the AVX2-only kind"). Each y is a
// float32 sum in k order with FMA: the same result as any float32 matmul up to the order of its sums.
#if defined(__AVX2__) && defined(__FMA__)
constexpr int64_t PANEL = 16, ROW_BLOCK = 6, ROW_CHUNK = 64;

template <int MB>
inline void panel_rows(int64_t K, const float* x, int64_t ldx, const float* w, float* y, int64_t ldy, const float* b) {
  // every loop over the rows unrolled, so the 12 accumulators live in registers (rolled, GCC keeps a copy of each
  // in memory and stores all 12 every k: half the speed)
  __m256 acc[MB][2];
#pragma GCC unroll 6
  for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(w + k * PANEL), w1 = _mm256_loadu_ps(w + k * PANEL + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MB; ++i) {
      const __m256 xi = _mm256_broadcast_ss(x + i * ldx + k);
      acc[i][0] = _mm256_fmadd_ps(xi, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(xi, w1, acc[i][1]);
    }
  }
  const __m256 b0 = b ? _mm256_loadu_ps(b) : _mm256_setzero_ps(), b1 = b ? _mm256_loadu_ps(b + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int i = 0; i < MB; ++i) {
    _mm256_storeu_ps(y + i * ldy, b ? _mm256_add_ps(acc[i][0], b0) : acc[i][0]);
    _mm256_storeu_ps(y + i * ldy + 8, b ? _mm256_add_ps(acc[i][1], b1) : acc[i][1]);
  }
}

using PanelRows = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, const float*);
constexpr PanelRows PANEL_ROWS[ROW_BLOCK + 1] = {nullptr, panel_rows<1>, panel_rows<2>, panel_rows<3>,
                                                 panel_rows<4>, panel_rows<5>, panel_rows<6>};
#endif

bool panel_linear_available() {
#if defined(__AVX2__) && defined(__FMA__)
  return true;
#else
  return false;
#endif
}

// x (M, K) float32 with unit column stride; wp (N / 16, K, 16) float32 panels; bias (N,) float32 or None -> (M, N)
torch::Tensor panel_linear(torch::Tensor x, torch::Tensor wp, c10::optional<torch::Tensor> bias) {
#if defined(__AVX2__) && defined(__FMA__)
  TORCH_CHECK(x.scalar_type() == at::kFloat && wp.scalar_type() == at::kFloat, "float32 only");
  TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1, "x (M, K) with unit column stride");
  TORCH_CHECK(wp.dim() == 3 && wp.size(2) == PANEL && wp.is_contiguous(), "wp (N / 16, K, 16) contiguous");
  const int64_t M = x.size(0), K = x.size(1), panels = wp.size(0), N = panels * PANEL, ldx = x.stride(0);
  TORCH_CHECK(wp.size(1) == K, "x and the weight disagree on K");
  torch::Tensor bc;
  if (bias && bias->defined()) {
    bc = bias->contiguous();
    TORCH_CHECK(bc.scalar_type() == at::kFloat && bc.numel() == N, "float32 bias of N");
  }
  auto y = torch::empty({M, N}, x.options());
  const float* X = x.data_ptr<float>();
  const float* W = wp.data_ptr<float>();
  const float* B = bc.defined() ? bc.data_ptr<float>() : nullptr;
  float* Y = y.data_ptr<float>();
  for (int64_t m0 = 0; m0 < M; m0 += ROW_CHUNK) {
    const int64_t rows = std::min(ROW_CHUNK, M - m0);
    const int64_t blocks = (rows + ROW_BLOCK - 1) / ROW_BLOCK;  // as even as they go: 8 rows are 4 + 4, not 6 + 2
    at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        int64_t m = m0;
        for (int64_t blk = 0; blk < blocks; ++blk) {
          const int64_t mb = (rows - (m - m0) + (blocks - blk) - 1) / (blocks - blk);
          PANEL_ROWS[mb](K, X + m * ldx, ldx, W + p * K * PANEL, Y + m * N + p * PANEL, N, B ? B + p * PANEL : nullptr);
          m += mb;
        }
      }
    });
  }
  return y;
#else
  TORCH_CHECK(false, "panel_linear needs AVX2 and FMA");
  return x;
#endif
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("decode_attend", &decode_attend, "one decode step's cascade attention for one layer (bf16 or float32)",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("pk"), py::arg("pv"), py::arg("gk"), py::arg("gv"),
        py::arg("prompt_of"), py::arg("slot_of"), py::arg("prompt_len"), py::arg("t"), py::arg("window") = 0);
  m.def("rms_norm", &rms_norm, "RMSNorm of a float32 stream, rounded once to bf16 (to_bf16) or kept in float32");
  m.def("rope", &rope, "rotary embedding of the q|k heads of a qkv output (bf16 or float32)");
  m.def("head_norm_rope", &head_norm_rope, "per-head RMSNorm of the q|k heads of a qkv output, then rope (bf16 or float32)",
        py::arg("qkv"), py::arg("weight"), py::arg("rot"), py::arg("eps"), py::arg("round_last") = false);
  m.def("silu_mul", &silu_mul, "silu(gate) * up of a gate|up output (bf16 or float32)");
  m.def("gelu_tanh_mul", &gelu_tanh_mul, "gelu_tanh(gate) * up of a gate|up output (bf16 or float32)");
  m.def("panel_linear_available", &panel_linear_available, "whether panel_linear was compiled (AVX2 and FMA)");
  m.def("panel_linear", &panel_linear, "float32 x W^T (+ b) for a few rows, W packed in panels of 16 columns",
        py::arg("x"), py::arg("wp"), py::arg("bias") = py::none());
}
