// Symbol visibility for the bigset shared library.
//
// The library is built with hidden visibility; every public class and
// function is marked BIGSET_EXPORT so that only the documented API is
// exported from libbigset.so.

#ifndef BIGSET_EXPORT_H_
#define BIGSET_EXPORT_H_

#if defined(_WIN32)
#define BIGSET_EXPORT
#else
#define BIGSET_EXPORT __attribute__((visibility("default")))
#endif

#endif  // BIGSET_EXPORT_H_
