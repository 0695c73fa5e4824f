#pragma once
// TG_ASAN (TG_TSAN) is defined when AddressSanitizer (ThreadSanitizer) instruments this build:
// gcc says so with __SANITIZE_ADDRESS__ (__SANITIZE_THREAD__), clang with __has_feature.

#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define TG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TG_TSAN 1
#endif
#endif
