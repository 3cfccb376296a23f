// The runtime of C++ code generated from Knossos programs (cpp_backend/emit.py).
//
// Values: Float = double, Integer = std::int64_t, Bool = bool, (Vec T) = ks::Vec<T>, (Tuple T...) =
// std::tuple<T...>, (Lam S T) = std::function<T(const S&)>.  Vectors point into an arena: everything a
// call allocates lives until the caller resets the arena to a mark taken before the call (the driver
// does so around each call; sumbuild does so around each iteration after the first, whose memory the
// accumulator owns).  Values are immutable once built, so vectors share storage freely.
//
// A vector is dense, or lazy: CONST (n copies of one element) or DELTA (zero everywhere except at one
// index); any vector can also be read as "zero with the shape of this vector" (the zero flag), which is
// how zero_like of a vector costs nothing.  index works on lazy vectors directly; arithmetic keeps
// results lazy where that is exact (constants, adding zeros, deltas at one index) and materialises
// otherwise; sumbuild's accumulator is a dense copy of the first iteration to which the others are
// added in place, so adding a deltaVec costs one element.
//
// Semantics follow knossos/interpreter.py: IEEE doubles (compile with -ffp-contract=off: no fused
// multiply-add), 64-bit Integers whose overflow is an error, Integer division truncating towards zero
// (by zero: an error), index out of range, element-wise operations on vectors of different sizes and
// failed asserts are errors.  Errors are thrown as ks::Error with a one-line message.  Lazy results are
// exact, signs of zeros included; a lazy zero added to an accumulator is skipped, and +0.0 added to
// the whole accumulator once at the end where that matters.  Float sums (sum, sumbuild, dotv, ...) add
// in index order from +0.0, as the interpreter's arith.fsum_in_order does, so they agree to the bit,
// infinities and NaN included, when KS_EXACT_ORDER is defined (or OpenMP is off).  By default, compiled
// with -fopenmp, Float sums may be reassociated (vectorised, KS_SIMD_SUM, and split across threads,
// KS_PAR_SUM): the same terms, added in another order, so results differ from the in-order sum by
// rounding only (see docs/cpp.md for the tolerance).  Loops whose iterations are independent (builds,
// and Float sums by default) may run on several threads (KS_PAR_FOR, with ParallelErrors reporting the
// error of the first failing iteration, as a serial loop would).  One known difference: the sizes of
// the zeros of lazy vectors are not compared with those of the other operand (only the outer size is).
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

#define KS_PRAGMA(x) _Pragma(#x)
// KS_INLINE: the small helpers generated loops call on every iteration (the arena's mark, reset and
// bump allocation, size checks, Integer arithmetic).  A gradient's function is large, and g++ stops
// inlining once the translation unit has grown by --param inline-unit-growth: these calls then stayed
// out of line in hot loops (MultiheadAttention's gradient: 101 calls of arena() alone).  KS_COLD: the
// failing and lazy paths, out of line, so that they neither use the inlining budget nor look likely.
// (make_vec stays a plain inline: forcing it everywhere cost 40% more g++ time for no speed.)
#define KS_INLINE inline __attribute__((always_inline))
#define KS_COLD __attribute__((noinline, cold))
#if defined(_OPENMP)
// A loop whose iterations are independent, on threads when `cond` holds.
#define KS_PAR_FOR(cond) KS_PRAGMA(omp parallel for schedule(static) if (cond))
#define KS_PAR_FOR_SIMD(cond) KS_PRAGMA(omp parallel for simd schedule(static) if (cond))
#else
#define KS_PAR_FOR(cond)
#define KS_PAR_FOR_SIMD(cond)
#endif
#if defined(_OPENMP) && !defined(KS_EXACT_ORDER)
// acc += ... in any order: vectorised, and (KS_PAR_SUM) on threads when `cond` holds.
#define KS_SIMD_SUM(acc) KS_PRAGMA(omp simd reduction(+ : acc))
#define KS_PAR_SUM(acc, cond) KS_PRAGMA(omp parallel for simd schedule(static) reduction(+ : acc) if (cond))
#define KS_PAR_SUM_SERIAL(acc, cond) KS_PRAGMA(omp parallel for schedule(static) reduction(+ : acc) if (cond))
#else
#define KS_SIMD_SUM(acc)
#define KS_PAR_SUM(acc, cond)
#define KS_PAR_SUM_SERIAL(acc, cond)
#endif
#if defined(_OPENMP)
#define KS_SIMD KS_PRAGMA(omp simd)
#else
#define KS_SIMD
#endif
#if defined(_OPENMP) && !defined(KS_EXACT_ORDER) && defined(__FMA__)
// acc + x * y as a term of a reassociated Float sum: one fused multiply-add, one rounding (only where
// sums may be reassociated, and only where the CPU has the instruction: std::fma is slow without it).
#define KS_MADD(acc, x, y) std::fma((x), (y), (acc))
#else
#define KS_MADD(acc, x, y) ((acc) + (x) * (y))
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// Elementary functions (ks::math::exp ...).  Where the compiler links glibc's vector math (libmvec: the
// vector variants of libm's functions, within 4 ulp; KS_VECTOR_MATH, set by cpp_backend.compile), each is
// declared with its vector variants so that g++ vectorises the loops that call it, as PyTorch's own
// kernels are (Sleef).  Never under KS_EXACT_ORDER: there they are libm's, as the interpreter's, to the bit.
namespace ks {
namespace math {
#if defined(KS_VECTOR_MATH) && !defined(KS_EXACT_ORDER)
#define KS_VECTOR_FN(name) double name(double) noexcept __asm__(#name) __attribute__((simd("notinbranch"), const));
KS_VECTOR_FN(exp)
KS_VECTOR_FN(log)
KS_VECTOR_FN(tanh)
KS_VECTOR_FN(log1p)
KS_VECTOR_FN(expm1)
KS_VECTOR_FN(erf)
KS_VECTOR_FN(sin)
KS_VECTOR_FN(cos)
double pow(double, double) noexcept __asm__("pow") __attribute__((simd("notinbranch"), const));
#undef KS_VECTOR_FN
#else
using std::cos;
using std::erf;
using std::exp;
using std::expm1;
using std::log;
using std::log1p;
using std::pow;
using std::sin;
using std::tanh;
#endif
}  // namespace math
}  // namespace ks

namespace ks {

// -- errors ----------------------------------------------------------------------------------------
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

// -- the arena -------------------------------------------------------------------------------------
class Arena {
    struct Chunk {
        char* base;
        std::size_t cap;
        std::size_t used;
    };
    std::vector<Chunk> chunks_;
    std::size_t cur_ = 0;
    std::size_t limit_ = std::numeric_limits<std::size_t>::max();  // bytes the arena may reserve in all
    static constexpr std::size_t kFirstChunk = std::size_t(1) << 20;

   public:
    struct Mark {
        std::size_t chunk;
        std::size_t used;
    };

    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena() {
        for (Chunk& c : chunks_) std::free(c.base);
    }

    KS_INLINE Mark mark() const { return chunks_.empty() ? Mark{0, 0} : Mark{cur_, chunks_[cur_].used}; }

    // Release everything allocated since the mark (the memory is kept for reuse).
    KS_INLINE void reset(Mark m) {
        if (chunks_.empty()) return;
        cur_ = m.chunk;
        chunks_[cur_].used = m.used;
    }

    // A budget: an allocation that would make the arena reserve more than `bytes` fails (ks::Error).
    void set_limit(std::size_t bytes) { limit_ = bytes; }

    // Frees unused chunks, last first, until the arena reserves at most `bytes` (or nothing more is
    // free): memory reserved under a larger budget is not reused under a smaller one.
    void shrink_to(std::size_t bytes) {
        while (!chunks_.empty() && bytes_reserved() > bytes) {
            const bool in_use = chunks_.size() == cur_ + 1 && chunks_[cur_].used > 0;
            if (in_use) return;
            std::free(chunks_.back().base);
            chunks_.pop_back();
            if (cur_ >= chunks_.size()) cur_ = chunks_.empty() ? 0 : chunks_.size() - 1;
        }
    }
    std::size_t limit() const { return limit_; }

    std::size_t bytes_reserved() const {
        std::size_t total = 0;
        for (const Chunk& c : chunks_) total += c.cap;
        return total;
    }

    KS_INLINE void* alloc(std::size_t bytes, std::size_t align) {
        if (!chunks_.empty()) {
            Chunk& c = chunks_[cur_];
            std::size_t p = (c.used + align - 1) & ~(align - 1);
            if (p <= c.cap && bytes <= c.cap - p) {
                c.used = p + bytes;
                return c.base + p;
            }
        }
        return alloc_slow(bytes, align);
    }

    [[noreturn]] KS_COLD void over_budget(const std::string& what) const {
        fail("allocation of " + what + " is beyond the memory budget of " + std::to_string(limit_ >> 20) + " MiB");
    }

   private:
    KS_COLD void* alloc_slow(std::size_t bytes, std::size_t align) {
        if (bytes > (std::numeric_limits<std::size_t>::max() >> 2)) over_budget(std::to_string(bytes) + " bytes");
        std::size_t need = bytes + align;
        std::size_t next = chunks_.empty() ? 0 : cur_ + 1;
        if (next < chunks_.size() && chunks_[next].cap < need) {  // too small to reuse: replace it
            std::free(chunks_[next].base);
            chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(next));
        }
        if (next >= chunks_.size() || chunks_[next].cap < need) {
            const std::size_t reserved = bytes_reserved();
            if (need > limit_ || reserved > limit_ - need) over_budget(std::to_string(bytes) + " bytes");
            std::size_t cap = chunks_.empty() ? kFirstChunk : 2 * chunks_.back().cap;
            cap = std::min(std::max(cap, need), std::max(need, limit_ - reserved));
            cap = (cap + 63) & ~std::size_t(63);
            void* base = std::aligned_alloc(64, cap);
            if (base == nullptr) throw std::bad_alloc();
            chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(std::min(next, chunks_.size())),
                           Chunk{static_cast<char*>(base), cap, 0});
        }
        cur_ = next;
        Chunk& c = chunks_[cur_];
        c.used = 0;
        std::size_t p = (c.used + align - 1) & ~(align - 1);
        c.used = p + bytes;
        return c.base + p;
    }
};

// The thread's arena, built on its first use.  The inlined fast path reads one pointer, constant-
// initialised, so no guard is tested; the arena itself (destroyed with its thread) is made out of line.
KS_COLD inline Arena* make_arena() {
    static thread_local Arena a;
    return &a;
}

KS_INLINE Arena& arena() {
    static thread_local Arena* a = nullptr;
    if (__builtin_expect(a == nullptr, 0)) a = make_arena();
    return *a;
}

// -- threads ---------------------------------------------------------------------------------------
// The number of threads parallel loops use (0: OpenMP's default, the machine's cores).
inline void set_threads(int n) {
#if defined(_OPENMP)
    omp_set_num_threads(n > 0 ? n : omp_get_num_procs());
#else
    (void)n;
#endif
}

// Inside a parallel loop: every thread's arena takes the budget of the thread that started the loop,
// and each iteration releases what it allocated (a parallel loop's iterations produce scalars, or
// write into memory allocated before the loop, so nothing they allocate outlives them).
class IterationScope {
    Arena::Mark mark_;

   public:
    explicit IterationScope(std::size_t limit) : mark_(arena().mark()) { arena().set_limit(limit); }
    IterationScope(const IterationScope&) = delete;
    IterationScope& operator=(const IterationScope&) = delete;
    ~IterationScope() { arena().reset(mark_); }
};

// The error of a parallel loop: that of the first iteration (in index order) that failed, as in a
// serial loop (every iteration before it runs; those after it may be skipped).
class ParallelErrors {
    std::int64_t first_ = std::numeric_limits<std::int64_t>::max();
    std::exception_ptr error_;

   public:
    bool skip(std::int64_t i) const {
        std::int64_t f;
#if defined(_OPENMP)
#pragma omp atomic read
#endif
        f = first_;
        return i > f;
    }
    void record(std::int64_t i, std::exception_ptr e) {
#if defined(_OPENMP)
#pragma omp critical(ks_parallel_errors)
#endif
        {
            if (i < first_) {
                error_ = e;
#if defined(_OPENMP)
#pragma omp atomic write
#endif
                first_ = i;
            }
        }
    }
    void rethrow() const {
        if (error_) std::rethrow_exception(error_);
    }
};

// Resets the arena to where it was when constructed (used by the driver around each call).
class ArenaScope {
    Arena::Mark mark_;

   public:
    ArenaScope() : mark_(arena().mark()) {}
    ArenaScope(const ArenaScope&) = delete;
    ArenaScope& operator=(const ArenaScope&) = delete;
    ~ArenaScope() { arena().reset(mark_); }
};

// -- vectors ---------------------------------------------------------------------------------------
enum VecKind : std::uint8_t { DENSE = 0, CONST = 1, DELTA = 2 };

// The one stored element of a lazy vector: CONST (every element) or DELTA (the element at `hot`, which
// may be out of range; every other element is zero_like(value)).
template <class T>
struct Lazy {
    T value;
    std::int64_t hot;
    VecKind kind;
};

// A vector is 16 bytes, passed and returned in registers: a tagged pointer and a size.  Untagged, the
// pointer is the dense elements (the fast path of every access tests two bits).  Bit 0 set: it points
// to a Lazy<T>.  Bit 1 set: every element reads as zero_like(element) (how zero_like(v) costs nothing).
// Arena memory is at least 8-aligned, so the bits are free.
template <class T>
struct Vec {
    static_assert(std::is_trivially_destructible<T>::value,
                  "vector elements live in the arena and are never destroyed (no functions in vectors)");
    T* data = nullptr;   // dense elements when untagged; fresh vectors from make_vec are filled through it
    std::int64_t n = 0;  // number of elements

    std::int64_t size() const { return n; }
    std::uintptr_t bits() const { return reinterpret_cast<std::uintptr_t>(data); }
    bool plain() const { return (bits() & 3) == 0; }  // dense, not read as zeros
    bool lazy() const { return (bits() & 1) != 0; }
    bool zero() const { return (bits() & 2) != 0; }
    const Lazy<T>* header() const { return reinterpret_cast<const Lazy<T>*>(bits() & ~std::uintptr_t(3)); }
    const T* dense() const { return reinterpret_cast<const T*>(bits() & ~std::uintptr_t(3)); }
    VecKind kind() const { return lazy() ? header()->kind : DENSE; }
    std::int64_t hot() const { return header()->hot; }  // DELTA only
    const T& stored() const { return header()->value; }  // CONST and DELTA only

    inline T get(std::int64_t k) const {  // element k, 0 <= k < n (not checked)
        if (__builtin_expect(plain(), 1)) return data[k];
        return get_lazy(k);
    }
    KS_COLD T get_lazy(std::int64_t k) const;
};

template <class T>
struct is_vec : std::false_type {};
template <class T>
struct is_vec<Vec<T>> : std::true_type {};
template <class T>
struct is_tuple : std::false_type {};
template <class... Ts>
struct is_tuple<std::tuple<Ts...>> : std::true_type {};
template <class T>
constexpr bool is_number_v = std::is_same<T, double>::value || std::is_same<T, std::int64_t>::value;
template <class V>
using elem_t = typename std::remove_const<typename std::remove_reference<decltype(*std::declval<V>().data)>::type>::type;

[[noreturn]] KS_COLD inline void negative_size(std::int64_t n, const char* what) {
    fail(std::string(what) + " of negative size " + std::to_string(n));
}

KS_INLINE void check_size(std::int64_t n, const char* what) {
    if (__builtin_expect(n < 0, 0)) negative_size(n, what);
}

// Binds a size variable of a sized vector parameter (Vec n T), checking that its uses agree.
inline void bind_size(std::int64_t& slot, bool& have, std::int64_t n) {
    if (have && slot != n)
        fail("a vector has " + std::to_string(n) + " elements but its size is already " + std::to_string(slot));
    slot = n;
    have = true;
}

template <class T>
inline T* alloc_array(std::int64_t n) {
    if (n <= 0) return nullptr;
    if (static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max() / (4 * sizeof(T)))
        arena().over_budget("a vector of " + std::to_string(n) + " elements");  // its bytes overflow
    constexpr std::size_t align = alignof(T) < 8 ? 8 : alignof(T);  // low pointer bits are tags
    T* p = static_cast<T*>(arena().alloc(static_cast<std::size_t>(n) * sizeof(T), align));
    if constexpr (!std::is_trivially_default_constructible<T>::value) {
        for (std::int64_t i = 0; i < n; ++i) new (p + i) T();
    }
    return p;
}

// A dense vector of n elements to be filled through .data.
template <class T>
Vec<T> make_vec(std::int64_t n) {
    Vec<T> v;
    v.data = alloc_array<T>(n);
    v.n = n;
    return v;
}

template <class T>
Vec<T> lazy_vec(std::int64_t n, VecKind kind, std::int64_t hot, const T& x) {
    Lazy<T>* h = static_cast<Lazy<T>*>(arena().alloc(sizeof(Lazy<T>), alignof(Lazy<T>) < 8 ? 8 : alignof(Lazy<T>)));
    new (h) Lazy<T>{x, hot, kind};
    Vec<T> v;
    v.data = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(h) | 1);
    v.n = n;
    return v;
}

template <class T>
Vec<T> const_vec(std::int64_t n, const T& x) {
    check_size(n, "constVec");
    return lazy_vec<T>(n, CONST, 0, x);
}

template <class T>
Vec<T> delta_vec(std::int64_t n, std::int64_t i, const T& x) {
    check_size(n, "deltaVec");
    return lazy_vec<T>(n, DELTA, i, x);
}

// zero_like(x): zeros of x's shape, without allocating.
template <class T>
inline T zero_like(const T& x);

template <class... Ts, std::size_t... I>
std::tuple<Ts...> zero_like_tuple(const std::tuple<Ts...>& x, std::index_sequence<I...>) {
    return std::tuple<Ts...>(zero_like(std::get<I>(x))...);
}

template <class T>
inline T zero_like(const T& x) {
    if constexpr (is_vec<T>::value) {
        T z = x;
        z.data = reinterpret_cast<decltype(z.data)>(x.bits() | 2);
        return z;
    } else if constexpr (is_tuple<T>::value) {
        return zero_like_tuple(x, std::make_index_sequence<std::tuple_size<T>::value>{});
    } else {
        (void)x;
        return T{};
    }
}

#if defined(KS_COUNT_LAZY_READS)
// The calls of get_lazy (a test counts them: a loop over a lazy vector makes none per element).
inline std::int64_t lazy_reads = 0;
#endif

template <class T>
T Vec<T>::get_lazy(std::int64_t k) const {
#if defined(KS_COUNT_LAZY_READS)
    ++lazy_reads;
#endif
    if (!lazy()) return zero_like(dense()[k]);
    const Lazy<T>* h = header();
    if (h->kind == DELTA && k != h->hot) return zero_like(h->value);
    return zero() ? zero_like(h->value) : h->value;
}

[[noreturn]] KS_COLD inline void index_error(std::int64_t i, std::int64_t n) {
    fail("index " + std::to_string(i) + " is out of range for a vector of size " + std::to_string(n));
}

template <class T>
inline T index(std::int64_t i, const Vec<T>& v) {
    if (__builtin_expect(static_cast<std::uint64_t>(i) >= static_cast<std::uint64_t>(v.n), 0)) index_error(i, v.n);
    if (__builtin_expect(v.plain(), 1)) return v.data[i];
    return v.get_lazy(i);
}

// Every index in [0, n) of v is in range: checked once before a loop that reads them all.
template <class T>
inline void check_range(std::int64_t n, const Vec<T>& v) {
    if (__builtin_expect(n > v.n, 0)) index_error(v.n, v.n);
}

// The reads of v at s i + c for 0 <= i < n (n > 0, s >= 1, c >= 0): the first out of range fails as
// its read would (a pairwise fold reads 2 i and 2 i + 1).
template <class T>
inline void check_strided(std::int64_t n, std::int64_t s, std::int64_t c, const Vec<T>& v) {
    if (__builtin_expect(c >= v.n, 0)) index_error(c, v.n);
    const std::int64_t last = (v.n - 1 - c) / s;  // the last i whose read is in range
    if (__builtin_expect(last < n - 1, 0)) index_error(s * (last + 1) + c, v.n);
}

// A blocked loop nest (see emit.py, _block_rows) found a vector it cannot read through a pointer: it
// throws this, catches it and the plain loops compute the same values instead.
struct Fallback {};
[[noreturn]] KS_COLD inline void fall_back() { throw Fallback(); }
template <class T>
inline void require_dense(std::int64_t n, const Vec<T>& v) {
    if (__builtin_expect(n > v.n || !v.plain(), 0)) fall_back();
}

template <class T>
inline std::int64_t size(const Vec<T>& v) {
    return v.n;
}

// Every element zero (of either sign), known without looking at dense storage.
template <class T>
inline bool is_all_zero(const T& x) {
    if constexpr (is_vec<T>::value) {
        if (x.zero()) return true;
        if (!x.lazy()) return x.n == 0;
        return is_all_zero(x.stored());
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([](const auto&... e) { return (true && ... && is_all_zero(e)); }, x);
    } else if constexpr (is_number_v<T>) {
        return x == 0;
    } else {
        return false;
    }
}

// Every element +0.0 (or Integer 0), known without looking at dense storage: what zero_like gives.
template <class T>
inline bool is_pos_zero(const T& x) {
    if constexpr (is_vec<T>::value) {
        if (x.zero()) return true;
        if (!x.lazy()) return x.n == 0;
        return is_pos_zero(x.stored());
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([](const auto&... e) { return (true && ... && is_pos_zero(e)); }, x);
    } else if constexpr (std::is_same<T, double>::value) {
        return x == 0.0 && !std::signbit(x);
    } else if constexpr (is_number_v<T>) {
        return x == 0;
    } else {
        return false;
    }
}

// -- scalar arithmetic -----------------------------------------------------------------------------
[[noreturn]] KS_COLD inline void overflow() { fail("Integer overflow (Integers are 64-bit)"); }

KS_INLINE std::int64_t add_i(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
}
KS_INLINE std::int64_t sub_i(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) overflow();
    return r;
}
KS_INLINE std::int64_t mul_i(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
}
inline std::int64_t div_i(std::int64_t a, std::int64_t b) {
    if (b == 0) fail("Integer division by zero");
    if (a == std::numeric_limits<std::int64_t>::min() && b == -1) overflow();
    return a / b;
}
inline std::int64_t neg_i(std::int64_t a) {
    if (a == std::numeric_limits<std::int64_t>::min()) overflow();
    return -a;
}
inline std::int64_t abs_i(std::int64_t a) { return a < 0 ? neg_i(a) : a; }
// std::max: the first argument unless it is less than the second.
inline double max_f(double a, double b) { return a < b ? b : a; }
inline std::int64_t max_i(std::int64_t a, std::int64_t b) { return a < b ? b : a; }
// pow(x, N) for N in 2..4 as products (not under exact order: a rounding more than C's pow).
template <int N>
inline double pow_whole(double x) {
    static_assert(N >= 2 && N <= 4, "pow_whole: exponent 2, 3 or 4");
    if constexpr (N == 2) return x * x;
    else if constexpr (N == 3) return x * x * x;
    else return (x * x) * (x * x);
}

// Comparisons as functions: the same operand on both sides must not be a compiler warning.
template <class T>
inline bool eq(T a, T b) { return a == b; }
template <class T>
inline bool ne(T a, T b) { return a != b; }
template <class T>
inline bool gt(T a, T b) { return a > b; }
template <class T>
inline bool gte(T a, T b) { return a >= b; }
template <class T>
inline bool lt(T a, T b) { return a < b; }
template <class T>
inline bool lte(T a, T b) { return a <= b; }

struct AddOp {
    static constexpr bool zero_preserving = true;  // 0 + 0 == 0
    static double f(double a, double b) { return a + b; }
    static std::int64_t f(std::int64_t a, std::int64_t b) { return add_i(a, b); }
};
struct SubOp {
    static constexpr bool zero_preserving = true;
    static double f(double a, double b) { return a - b; }
    static std::int64_t f(std::int64_t a, std::int64_t b) { return sub_i(a, b); }
};
struct MulOp {
    static constexpr bool zero_preserving = true;  // 0 * 0 == 0
    static double f(double a, double b) { return a * b; }
    static std::int64_t f(std::int64_t a, std::int64_t b) { return mul_i(a, b); }
};
struct DivOp {
    static constexpr bool zero_preserving = false;  // 0 / 0 is NaN
    static double f(double a, double b) { return a / b; }
    static std::int64_t f(std::int64_t a, std::int64_t b) { return div_i(a, b); }
};

// -- element-wise arithmetic over vectors and tuples -------------------------------------------------
template <class Op, class A, class B>
auto arith(const A& a, const B& b);

[[noreturn]] KS_COLD inline void size_mismatch(std::int64_t a, std::int64_t b) {
    fail("element-wise operation on vectors of sizes " + std::to_string(a) + " and " + std::to_string(b));
}

template <class T, std::size_t... I>
inline bool same_tuple_bits(const T& x, const T& y, std::index_sequence<I...>);

// x and y are the same value to the bit, as far as that is cheap to tell: equal bits of numbers,
// vectors that share their storage (values are immutable, so one can stand for the other).
template <class T>
inline bool same_bits(const T& x, const T& y) {
    if constexpr (is_vec<T>::value) {
        return x.data == y.data && x.n == y.n;
    } else if constexpr (is_tuple<T>::value) {
        return same_tuple_bits(x, y, std::make_index_sequence<std::tuple_size<T>::value>{});
    } else if constexpr (std::is_same<T, double>::value) {
        return std::memcmp(&x, &y, sizeof x) == 0;
    } else {
        return x == y;
    }
}

template <class T, std::size_t... I>
inline bool same_tuple_bits(const T& x, const T& y, std::index_sequence<I...>) {
    return (true && ... && same_bits(std::get<I>(x), std::get<I>(y)));
}

// The element of a lazy vector everywhere but at a DELTA's hot index.
template <class T>
inline T lazy_fill(const Vec<T>& v) {
    return v.kind() == DELTA || v.zero() ? zero_like(v.stored()) : v.stored();
}

// f(k, element k of v) for 0 <= k < n (n <= v.n), v's kind tested once for the loop, not at each
// element (loop versioning): dense storage through a pointer, a lazy vector's one stored element (and
// its hot one), or the zeros of a vector read as zeros.  Element by element, v.get(k) would call the
// out-of-line get_lazy for every element of a lazy vector (a sumbuild's one-hot accumulator: 4,096
// calls for a 64 x 64 matrix).
template <class T, class F>
inline void each_elem(std::int64_t n, const Vec<T>& v, F&& f) {
    if (__builtin_expect(v.plain(), 1)) {
        const T* __restrict d = v.data;
        for (std::int64_t k = 0; k < n; ++k) f(k, d[k]);
    } else if (v.lazy()) {
        const T fill = lazy_fill(v);
        const bool hot = v.kind() == DELTA && !v.zero();
        const std::int64_t h = hot && static_cast<std::uint64_t>(v.hot()) < static_cast<std::uint64_t>(n) ? v.hot() : n;
        for (std::int64_t k = 0; k < h; ++k) f(k, fill);
        if (h < n) f(h, v.stored());
        for (std::int64_t k = h + 1; k < n; ++k) f(k, fill);
    } else {
        const T* d = v.dense();
        for (std::int64_t k = 0; k < n; ++k) f(k, zero_like(d[k]));
    }
}

// A second arena per thread, for the copies that live as long as one loop (DenseRead): they are
// released in the reverse order of their making, as the loops that make them nest, so that neither
// the arena of values nor the memory of a loop over a lazy vector grows with the loops around it.
KS_COLD inline Arena* make_scratch() {
    static thread_local Arena a;
    return &a;
}
KS_INLINE Arena& scratch() {
    static thread_local Arena* a = nullptr;
    if (__builtin_expect(a == nullptr, 0)) a = make_scratch();
    return *a;
}

// A loop's reads of the first m elements of v (m <= v.n, checked before) through a pointer: v's
// storage where v is dense, else a dense copy of them made once for the loop (in the scratch arena,
// under the arena's budget), which release() frees after the loop.  Read element by element, a lazy
// vector costs an out-of-line call per element; the copy costs one store each.  (No destructor: one
// in every loop cost g++ 6-10% more time on the attention layers' gradients, for its cleanups.  A
// loop left by an error does not release: an enclosing loop's release, or release_scratch after the
// call, does.)
template <class T>
class DenseRead {
    struct Copy {
        const T* data;
        Arena::Mark mark;  // where the scratch arena was before it
    };
    const T* p_;
    Arena::Mark mark_{};
    bool owned_ = false;

    // (returned by value, so that nothing of the object escapes on the dense path: it stays in registers)
    static __attribute__((noinline)) Copy copy(std::int64_t m, const Vec<T>& v) {
        Arena& a = scratch();
        a.set_limit(arena().limit());
        if (static_cast<std::uint64_t>(m) > std::numeric_limits<std::size_t>::max() / (4 * sizeof(T)))
            a.over_budget("a vector of " + std::to_string(m) + " elements");
        const Arena::Mark mark = a.mark();
        T* r = static_cast<T*>(a.alloc(static_cast<std::size_t>(m) * sizeof(T), alignof(T) < 8 ? 8 : alignof(T)));
        each_elem(m, v, [&](std::int64_t k, const T& x) { r[k] = x; });
        return Copy{r, mark};
    }

   public:
    DenseRead(std::int64_t m, const Vec<T>& v) : p_(v.data) {
        if (__builtin_expect(!v.plain(), 0)) {
            const Copy c = copy(m, v);
            p_ = c.data;
            mark_ = c.mark;
            owned_ = true;
        }
    }
    KS_INLINE const T* data() const { return p_; }
    KS_INLINE void release() const {
        if (__builtin_expect(owned_, 0)) free_copy(mark_);
    }
    static __attribute__((noinline)) void free_copy(Arena::Mark mark) { scratch().reset(mark); }
};

// After a call (that may have failed inside a loop): every copy of the thread's loops released.
inline void release_scratch() { scratch().reset(Arena::Mark{0, 0}); }

// (build n (lam i (index i v))): v itself where it is dense with n elements (values never change), else
// a dense copy of its first n, failing as the first read past its end would.
template <class T>
Vec<T> prefix_copy(std::int64_t n, const Vec<T>& v) {
    if (n == v.n && v.plain()) return v;
    if (n > v.n) index_error(v.n, v.n);
    Vec<T> r = make_vec<T>(n);
    each_elem(n, v, [&](std::int64_t k, const T& x) { r.data[k] = x; });
    return r;
}

template <class Op, class T>
Vec<T> zip_vec(const Vec<T>& a, const Vec<T>& b) {
    if (a.n != b.n) size_mismatch(a.n, b.n);
    const std::int64_t n = a.n;
    // Lazy operands give lazy results where that is exact, signs of zeros included; a result equal
    // to a to the bit is a itself (adding zeros to zeros allocates nothing).
    if (n > 0 && a.lazy() && b.lazy()) {
        const VecKind ka = a.kind(), kb = b.kind();
        if (ka == CONST && kb == CONST) {
            const T x = a.get(0), r = arith<Op>(x, b.get(0));
            return same_bits(r, x) ? a : const_vec<T>(n, r);
        }
        if constexpr (Op::zero_preserving) {  // +0 op +0 == +0: the zeros of a delta stay zeros
            const bool both = ka == DELTA && kb == DELTA && a.hot() == b.hot();
            const bool left = ka == DELTA && kb == CONST && is_pos_zero(b.get(0));
            const bool right = kb == DELTA && ka == CONST && is_pos_zero(a.get(0));
            if (both || left || right) {
                const std::int64_t hot = ka == DELTA ? a.hot() : b.hot();
                const std::int64_t at = static_cast<std::uint64_t>(hot) < static_cast<std::uint64_t>(n) ? hot : 0;
                const T r = arith<Op>(a.get(at), b.get(at));
                return ka == DELTA && !a.zero() && same_bits(r, a.stored()) ? a : delta_vec<T>(n, hot, r);
            }
        }
    }
    if constexpr (is_number_v<T>) {
        Vec<T> r = make_vec<T>(n);
        if (a.plain() && b.plain()) {
            for (std::int64_t k = 0; k < n; ++k) r.data[k] = arith<Op>(a.data[k], b.data[k]);
        } else if (n > 0 && (a.plain() || a.lazy()) && (b.plain() || b.lazy())) {
            // a lazy operand (a mean's constant cotangent, a one-hot): the same terms, in a loop that
            // vectorises over its value away from its hot element, then that element
            const T x = a.plain() ? T{} : lazy_fill(a), y = b.plain() ? T{} : lazy_fill(b);
            if (a.plain()) {
                for (std::int64_t k = 0; k < n; ++k) r.data[k] = arith<Op>(a.data[k], y);
            } else if (b.plain()) {
                for (std::int64_t k = 0; k < n; ++k) r.data[k] = arith<Op>(x, b.data[k]);
            } else {
                const T z = arith<Op>(x, y);
                for (std::int64_t k = 0; k < n; ++k) r.data[k] = z;
            }
            for (const Vec<T>* v : {&a, &b}) {
                const std::int64_t h = v->lazy() && v->kind() == DELTA ? v->hot() : -1;
                if (static_cast<std::uint64_t>(h) < static_cast<std::uint64_t>(n)) r.data[h] = arith<Op>(a.get(h), b.get(h));
            }
        } else {
            for (std::int64_t k = 0; k < n; ++k) r.data[k] = arith<Op>(a.get(k), b.get(k));
        }
        return r;
    } else {
        // vectors of vectors (or tuples): storage only from the first element that is not a's
        std::int64_t k = 0;
        T x{};
        for (; k < n; ++k) {
            x = arith<Op>(a.get(k), b.get(k));
            if (!same_bits(x, a.get(k))) break;
        }
        if (k == n) return a;
        Vec<T> r = make_vec<T>(n);
        for (std::int64_t j = 0; j < k; ++j) r.data[j] = a.get(j);
        r.data[k] = x;
        for (++k; k < n; ++k) r.data[k] = arith<Op>(a.get(k), b.get(k));
        return r;
    }
}

// s * +0 == +0 (sign included): s is finite and not negative.
template <class S>
inline bool mul_keeps_zero(S s) {
    if constexpr (std::is_same<S, double>::value) {
        return std::isfinite(s) && !std::signbit(s);
    } else {
        (void)s;
        return true;
    }
}

// +0 / s == +0 (sign included): s is positive (an infinity too).
template <class S>
inline bool div_keeps_zero(S s) {
    if constexpr (std::is_same<S, double>::value) {
        return s > 0.0;
    } else {
        return s != 0;
    }
}

// s op each element of v (scalar on the left)
template <class Op, class S, class T>
T bcast_left(S s, const T& v) {
    if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        const VecKind kind = v.kind();
        if (v.n > 0 && kind == CONST) return const_vec<E>(v.n, bcast_left<Op>(s, v.get(0)));
        if constexpr (std::is_same<Op, MulOp>::value) {
            if (kind == DELTA && !v.zero() && mul_keeps_zero(s))
                return delta_vec<E>(v.n, v.hot(), bcast_left<Op>(s, v.stored()));
        }
        T r = make_vec<E>(v.n);
        for (std::int64_t k = 0; k < v.n; ++k) r.data[k] = bcast_left<Op>(s, v.get(k));
        return r;
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([&](const auto&... e) { return T(bcast_left<Op>(s, e)...); }, v);
    } else {
        return Op::f(s, v);
    }
}

// each element of v op s (scalar on the right)
template <class Op, class S, class T>
T bcast_right(const T& v, S s) {
    if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        const VecKind kind = v.kind();
        if (v.n > 0 && kind == CONST) return const_vec<E>(v.n, bcast_right<Op>(v.get(0), s));
        if constexpr (std::is_same<Op, MulOp>::value) {
            if (kind == DELTA && !v.zero() && mul_keeps_zero(s))
                return delta_vec<E>(v.n, v.hot(), bcast_right<Op>(v.stored(), s));
        }
        if constexpr (std::is_same<Op, DivOp>::value) {
            if (kind == DELTA && !v.zero() && div_keeps_zero(s))
                return delta_vec<E>(v.n, v.hot(), bcast_right<Op>(v.stored(), s));
        }
        T r = make_vec<E>(v.n);
        for (std::int64_t k = 0; k < v.n; ++k) r.data[k] = bcast_right<Op>(v.get(k), s);
        return r;
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([&](const auto&... e) { return T(bcast_right<Op>(e, s)...); }, v);
    } else {
        return Op::f(v, s);
    }
}

template <class Op, class... Ts, std::size_t... I>
std::tuple<Ts...> zip_tuple(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b, std::index_sequence<I...>) {
    return std::tuple<Ts...>(arith<Op>(std::get<I>(a), std::get<I>(b))...);
}

template <class Op, class A, class B>
auto arith(const A& a, const B& b) {
    if constexpr (is_number_v<A> && is_number_v<B>) {
        static_assert(std::is_same<A, B>::value, "arithmetic on an Integer and a Float");
        return Op::f(a, b);
    } else if constexpr (is_number_v<A>) {
        return bcast_left<Op>(a, b);
    } else if constexpr (is_number_v<B>) {
        return bcast_right<Op>(a, b);
    } else if constexpr (is_vec<A>::value) {
        static_assert(std::is_same<A, B>::value, "element-wise arithmetic on different types");
        return zip_vec<Op>(a, b);
    } else {
        static_assert(std::is_same<A, B>::value, "element-wise arithmetic on different types");
        return zip_tuple<Op>(a, b, std::make_index_sequence<std::tuple_size<A>::value>{});
    }
}

template <class A, class B>
auto add(const A& a, const B& b) {
    return arith<AddOp>(a, b);
}
template <class A, class B>
auto sub(const A& a, const B& b) {
    return arith<SubOp>(a, b);
}
template <class A, class B>
auto mul(const A& a, const B& b) {
    return arith<MulOp>(a, b);
}
template <class A, class B>
auto div(const A& a, const B& b) {
    return arith<DivOp>(a, b);
}

template <class T>
T neg(const T& x) {
    if constexpr (std::is_same<T, double>::value) {
        return -x;
    } else if constexpr (std::is_same<T, std::int64_t>::value) {
        return neg_i(x);
    } else if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        if (x.n > 0 && x.kind() == CONST) return const_vec<E>(x.n, neg(x.get(0)));  // (-0.0 is not a zero_like)
        T r = make_vec<E>(x.n);
        for (std::int64_t k = 0; k < x.n; ++k) r.data[k] = neg(x.get(k));
        return r;
    } else {
        return std::apply([](const auto&... e) { return T(neg(e)...); }, x);
    }
}

// -- accumulation (sum, sumbuild) ------------------------------------------------------------------
// The zero of a type with no vectors in it (the sum of no elements); vectors: an error.
template <class T>
T zero_of(const char* type_text) {
    if constexpr (is_vec<T>::value) {
        fail(std::string("a sum over no elements of type ") + type_text + " has no defined size");
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([&](const auto&... e) { return T(zero_of<std::decay_t<decltype(e)>>(type_text)...); }, T{});
    } else {
        (void)type_text;
        return T{};
    }
}

// A copy that is dense at every level, in fresh memory (an accumulator that can be added to in place).
template <class T>
T copy_dense(const T& x) {
    if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        T r = make_vec<E>(x.n);
        each_elem(x.n, x, [&](std::int64_t k, const E& e) { r.data[k] = copy_dense(e); });
        return r;
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([](const auto&... e) { return T(copy_dense(e)...); }, x);
    } else {
        return x;
    }
}

template <class T, std::size_t... I>
void add_tuple_inplace(T& acc, const T& x, bool& skipped, std::index_sequence<I...>);
template <class T>
inline bool is_neg_zero(const T& x);

// acc += x, where acc came from copy_dense.  Zeros of lazy vectors are not added; where a +0.0 was
// skipped, `skipped` is set, and normalise_zeros(acc) once at the end of the accumulation makes the
// result exact (x + +0.0 differs from x only for x = -0.0, and adding it later gives the same sum).
template <class T>
void add_inplace(T& acc, const T& x, bool& skipped) {
    if constexpr (std::is_same<T, double>::value) {
        acc += x;
    } else if constexpr (std::is_same<T, std::int64_t>::value) {
        acc = add_i(acc, x);
    } else if constexpr (is_vec<T>::value) {
        if (acc.n != x.n) size_mismatch(acc.n, x.n);
        if (x.plain()) {
            for (std::int64_t k = 0; k < x.n; ++k) add_inplace(acc.data[k], x.data[k], skipped);
        } else if (x.zero()) {
            skipped = skipped || x.n > 0;
        } else if (x.kind() == CONST) {
            if (is_all_zero(x.stored())) {
                skipped = skipped || (x.n > 0 && !is_neg_zero(x.stored()));
                return;
            }
            for (std::int64_t k = 0; k < x.n; ++k) add_inplace(acc.data[k], x.stored(), skipped);
        } else {
            const std::int64_t hot = x.hot();
            const bool in_range = static_cast<std::uint64_t>(hot) < static_cast<std::uint64_t>(x.n);
            if (in_range) add_inplace(acc.data[hot], x.stored(), skipped);
            if (x.n > (in_range ? 1 : 0)) skipped = true;
        }
    } else {
        add_tuple_inplace(acc, x, skipped, std::make_index_sequence<std::tuple_size<T>::value>{});
    }
}

template <class T, std::size_t... I>
void add_tuple_inplace(T& acc, const T& x, bool& skipped, std::index_sequence<I...>) {
    (add_inplace(std::get<I>(acc), std::get<I>(x), skipped), ...);
}

// Every element -0.0 (a skipped -0.0 changes nothing), known without looking at dense storage.
template <class T>
inline bool is_neg_zero(const T& x) {
    if constexpr (is_vec<T>::value) {
        if (x.zero() || !x.lazy() || x.kind() == DELTA) return x.n == 0;
        return is_neg_zero(x.stored());
    } else if constexpr (is_tuple<T>::value) {
        return std::apply([](const auto&... e) { return (true && ... && is_neg_zero(e)); }, x);
    } else if constexpr (std::is_same<T, double>::value) {
        return x == 0.0 && std::signbit(x);
    } else {
        (void)x;
        return false;
    }
}

// acc += +0.0 everywhere (acc dense, from copy_dense): -0.0 becomes +0.0, nothing else changes.
template <class T>
void normalise_zeros(T& acc) {
    if constexpr (std::is_same<T, double>::value) {
        acc += 0.0;
    } else if constexpr (is_vec<T>::value) {
        for (std::int64_t k = 0; k < acc.n; ++k) normalise_zeros(acc.data[k]);
    } else if constexpr (is_tuple<T>::value) {
        std::apply([](auto&... e) { (normalise_zeros(e), ...); }, acc);
    }
}

// The sum of the elements of a vector: Floats from +0.0 in index order (never -0.0 from zeros);
// anything else the first element and the others added in place.
template <class T>
T sum(const Vec<T>& v, const char* type_text) {
    if (v.n == 0) return zero_of<T>(type_text);
    if constexpr (std::is_same<T, double>::value) {
        if (v.zero()) return 0.0;
        if (v.kind() == DELTA) {
            const std::int64_t hot = v.hot();
            return static_cast<std::uint64_t>(hot) < static_cast<std::uint64_t>(v.n) ? 0.0 + v.stored() : 0.0;
        }
        double acc = 0.0;
        if (v.plain()) {
            const double* __restrict x = v.data;
            const std::int64_t n = v.n;
            KS_SIMD_SUM(acc)
            for (std::int64_t k = 0; k < n; ++k) acc += x[k];
        } else {
            for (std::int64_t k = 0; k < v.n; ++k) acc += v.get(k);
        }
        return acc;
    } else {
        bool skipped = false;
        T acc = copy_dense(v.get(0));
        for (std::int64_t k = 1; k < v.n; ++k) add_inplace(acc, v.get(k), skipped);
        if (skipped) normalise_zeros(acc);
        return acc;
    }
}

// -- tuples ----------------------------------------------------------------------------------------
// (Tuple) is std::tuple<>; get$i$n is std::get<i - 1>.

// -- functions of the prelude and of edefs (knossos/natives.py) --------------------------------------
constexpr double kPi = 3.141592653589793;  // math.pi

// The C library's lgamma, which the interpreter calls too (knossos/libm.py), so that they agree to the
// bit; through a volatile pointer so that no compiler folds a constant argument with its own lgamma
// (correctly rounded, where glibc's is not: they differ in the last bit for about a third of [0.5, 20]).
inline double lgamma_f(double x) {
    double (*volatile f)(double) = ::lgamma;
    return f(x);
}

inline double digamma(double x) {
    if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
    double result = 0.0;
    if (x < 0) return digamma(1 - x) - kPi / std::tan(kPi * x);
    while (x < 6) {
        result -= 1 / x;
        x += 1;
    }
    double inv = 1 / x;
    double inv2 = inv * inv;
    return result + std::log(x) - 0.5 * inv -
           inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (1.0 / 240 - inv2 / 132))));
}

inline double dotv(const Vec<double>& a, const Vec<double>& b) {
    if (a.n != b.n) size_mismatch(a.n, b.n);
    double acc = 0.0;
    if (a.plain() && b.plain()) {
        const double* __restrict x = a.data;
        const double* __restrict y = b.data;
        const std::int64_t n = a.n;
        KS_SIMD_SUM(acc)
        for (std::int64_t k = 0; k < n; ++k) acc += x[k] * y[k];
    } else {
        for (std::int64_t k = 0; k < a.n; ++k) acc += a.get(k) * b.get(k);
    }
    return acc;
}

inline Vec<double> mul_mat_vec(const Vec<Vec<double>>& m, const Vec<double>& v) {
    Vec<double> r = make_vec<double>(m.n);
    for (std::int64_t i = 0; i < m.n; ++i) r.data[i] = dotv(m.get(i), v);
    return r;
}

inline std::tuple<Vec<Vec<double>>, Vec<double>> rev_mul_mat_vec(const Vec<Vec<double>>& m, const Vec<double>& v,
                                                                 const Vec<double>& dr) {
    Vec<Vec<double>> dm = make_vec<Vec<double>>(dr.n);
    for (std::int64_t i = 0; i < dr.n; ++i) {
        Vec<double> row = make_vec<double>(v.n);
        const double d = dr.get(i);
        for (std::int64_t j = 0; j < v.n; ++j) row.data[j] = d * v.get(j);
        dm.data[i] = row;
    }
    Vec<double> dv = make_vec<double>(v.n);
    for (std::int64_t j = 0; j < v.n; ++j) {
        double acc = 0.0;
        for (std::int64_t i = 0; i < m.n; ++i) acc += index(i, dr) * index(j, index(i, m));
        dv.data[j] = acc;
    }
    return std::tuple<Vec<Vec<double>>, Vec<double>>(dm, dv);
}

inline double ranhashdoub(std::int64_t v) {
    std::uint64_t x = static_cast<std::uint64_t>(v);
    x = x * 3935559000370003845ULL + 2691343689449507681ULL;
    x ^= x >> 21;
    x ^= x << 37;
    x ^= x >> 4;
    x *= 4768777513237032717ULL;
    x ^= x << 20;
    x ^= x >> 41;
    x ^= x << 5;
    return 5.42101086242752217e-20 * static_cast<double>(x);
}

// -- reading and writing values (the test driver's text format) -------------------------------------
// A value is a flat list of whitespace-separated tokens following its type: a Float as a C hex float
// (or inf, -inf, nan), an Integer in decimal, a Bool as 0 or 1, a vector as its size and then its
// elements, a tuple as its elements in order.
struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Reader {
    std::string text_;
    std::size_t pos_ = 0;

   public:
    explicit Reader(std::string text) : text_(std::move(text)) {}

    bool at_end() {
        skip();
        return pos_ >= text_.size();
    }

    std::string token() {
        skip();
        if (pos_ >= text_.size()) throw InputError("unexpected end of input");
        std::size_t start = pos_;
        while (pos_ < text_.size() && !is_space(text_[pos_])) ++pos_;
        return text_.substr(start, pos_ - start);
    }

    std::int64_t integer() {
        std::string t = token();
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(t.c_str(), &end, 10);
        if (errno != 0 || end != t.c_str() + t.size() || t.empty()) throw InputError("bad Integer token");
        return static_cast<std::int64_t>(v);
    }

    double real() {
        std::string t = token();
        char* end = nullptr;
        double v = std::strtod(t.c_str(), &end);
        if (end != t.c_str() + t.size() || t.empty()) throw InputError("bad Float token");
        return v;
    }

   private:
    static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
    void skip() {
        while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    }
};

template <class T, std::size_t... I>
T read_tuple(Reader& in, std::index_sequence<I...>);

template <class T>
T read_value(Reader& in) {
    if constexpr (std::is_same<T, double>::value) {
        return in.real();
    } else if constexpr (std::is_same<T, std::int64_t>::value) {
        return in.integer();
    } else if constexpr (std::is_same<T, bool>::value) {
        std::int64_t b = in.integer();
        if (b != 0 && b != 1) throw InputError("bad Bool token");
        return b == 1;
    } else if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        std::int64_t n = in.integer();
        if (n < 0) throw InputError("negative vector size");
        T v = make_vec<E>(n);
        for (std::int64_t k = 0; k < n; ++k) v.data[k] = read_value<E>(in);
        return v;
    } else {
        return read_tuple<T>(in, std::make_index_sequence<std::tuple_size<T>::value>{});
    }
}

template <class T, std::size_t... I>
T read_tuple(Reader& in, std::index_sequence<I...>) {
    return T{read_value<std::tuple_element_t<I, T>>(in)...};  // braced: read left to right
}

template <class T>
void write_value(std::string& out, const T& x) {
    char buf[64];
    if constexpr (std::is_same<T, double>::value) {
        std::snprintf(buf, sizeof buf, " %a", x);
        out += buf;
    } else if constexpr (std::is_same<T, std::int64_t>::value) {
        std::snprintf(buf, sizeof buf, " %lld", static_cast<long long>(x));
        out += buf;
    } else if constexpr (std::is_same<T, bool>::value) {
        out += x ? " 1" : " 0";
    } else if constexpr (is_vec<T>::value) {
        std::snprintf(buf, sizeof buf, " %lld", static_cast<long long>(x.n));
        out += buf;
        for (std::int64_t k = 0; k < x.n; ++k) {
            write_value(out, x.get(k));
            if (out.size() > arena().limit()) arena().over_budget("more than " + std::to_string(out.size()) + " bytes of text");
        }
    } else {
        std::apply([&](const auto&... e) { (write_value(out, e), ...); }, x);
    }
}

// A lower bound of the bytes write_value writes for x, saturating: it depends on shapes only (" 0x0p+0"
// is the shortest Float, " 0" the shortest Integer, Bool or size), so a lazy vector costs one element.
template <class T>
std::uint64_t text_bytes_at_least(const T& x) {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    const auto add = [](std::uint64_t a, std::uint64_t b) { return a > kMax - b ? kMax : a + b; };
    if constexpr (std::is_same<T, double>::value) {
        (void)x;
        return 7;
    } else if constexpr (std::is_same<T, std::int64_t>::value || std::is_same<T, bool>::value) {
        (void)x;
        return 2;
    } else if constexpr (is_vec<T>::value) {
        using E = elem_t<T>;
        const std::uint64_t n = static_cast<std::uint64_t>(x.n);
        if (n == 0) return 2;
        if (x.lazy() || !(is_vec<E>::value || is_tuple<E>::value)) {  // every element the same size
            const std::uint64_t each = text_bytes_at_least(x.get(0));
            return add(2, each > (kMax - 2) / n ? kMax : each * n);
        }
        std::uint64_t total = 2;
        for (std::int64_t k = 0; k < x.n && total < kMax; ++k) total = add(total, text_bytes_at_least(x.get(k)));
        return total;
    } else {
        std::uint64_t total = 0;
        std::apply([&](const auto&... e) { ((total = add(total, text_bytes_at_least(e))), ...); }, x);
        return total;
    }
}

// write_value within the arena's budget: the text of a lazy vector (constVec n x) can be far larger
// than the arena memory the vector took, so it is refused before it is written where its shortest
// form is beyond the budget, and while it is written once it passes the budget.
template <class T>
void write_result(std::string& out, const T& x) {
    const std::uint64_t least = text_bytes_at_least(x);
    if (least > arena().limit() - std::min(arena().limit(), out.size()))
        arena().over_budget("at least " + std::to_string(least) + " bytes of text");
    write_value(out, x);
}

// One line of text that cannot break the driver's line protocol.
inline std::string one_line(const std::string& s) {
    std::string r;
    for (char c : s) r += (c == '\n' || c == '\r') ? ' ' : c;
    return r;
}

}  // namespace ks
