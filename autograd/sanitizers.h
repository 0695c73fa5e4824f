#pragma once
// TG_ASAN is defined when AddressSanitizer instruments this build: gcc says so with
// __SANITIZE_ADDRESS__, clang with __has_feature(address_sanitizer).

#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif
