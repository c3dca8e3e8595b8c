#include "node/copy.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/config.h"

void mcoll__stream_copy(void *dst, const void *src, size_t len, size_t stream_min) {
#ifdef __SSE2__
  if (stream_min && len >= stream_min && ((uintptr_t)dst & 15) == 0) {
    char *out = dst;
    const char *in = src;
    size_t body = len & ~(size_t)63;
    for (size_t i = 0; i < body; i += 64) {
      __m128i x0 = _mm_loadu_si128((const __m128i *)(in + i));
      __m128i x1 = _mm_loadu_si128((const __m128i *)(in + i + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(in + i + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(in + i + 48));
      _mm_stream_si128((__m128i *)(out + i), x0);
      _mm_stream_si128((__m128i *)(out + i + 16), x1);
      _mm_stream_si128((__m128i *)(out + i + 32), x2);
      _mm_stream_si128((__m128i *)(out + i + 48), x3);
    }
    _mm_sfence();
    memcpy(out + body, in + body, len - body);
    return;
  }
#endif
  memcpy(dst, src, len);
}

void mcoll__area_write(void *dst, const void *src, size_t len) {
  mcoll__stream_copy(dst, src, len, (size_t)mcoll__cfg.AREA_STREAM_MIN);
}
