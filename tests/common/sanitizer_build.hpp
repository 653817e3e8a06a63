// Which sanitizer a test binary is built with (-DSTRATA_SANITIZE=...), for the few tests whose premise it changes.
#pragma once

namespace strata::testing {

#if defined(__has_feature)
#define STRATA_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define STRATA_TEST_HAS_FEATURE(x) 0
#endif

#if defined(__SANITIZE_THREAD__) || STRATA_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool under_thread_sanitizer = true;
#else
inline constexpr bool under_thread_sanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__) || STRATA_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool under_address_sanitizer = true;
#else
inline constexpr bool under_address_sanitizer = false;
#endif

// The sanitizers' common interceptors make mlock/munlock no-ops, so no memlock limit can be hit under them.
inline constexpr bool mlock_is_a_no_op = under_thread_sanitizer || under_address_sanitizer;

#undef STRATA_TEST_HAS_FEATURE

} // namespace strata::testing
