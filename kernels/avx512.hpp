#pragma once
// AVX-512 intrinsics for the hand-written kernels, when the build targets them.
#if defined(__AVX512F__)
// GCC 12 reports a false "(may be) used uninitialized" inside its own AVX-512
// headers (_mm512_undefined_ps is a self-initialised variable).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif
