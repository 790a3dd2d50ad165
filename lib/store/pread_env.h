// PreadEnv: a LevelDB Env whose table files are read with pread(2) rather
// than mapped into memory.
//
// LevelDB's POSIX Env maps up to a thousand table files into the process
// on 64-bit systems. Every page a read or a compaction touches then counts
// in the process's resident memory, which so grows with the data on disk
// (the pages are the kernel's page cache all the same, and reclaimable).
// Reading with pread keeps them out of the process: its resident memory is
// what it allocates, bounded by the store's caches. A read the block cache
// misses costs a system call instead of a page fault.
//
// Thread-safety: safe for concurrent use, like every Env.

#ifndef BIGSET_STORE_PREAD_ENV_H_
#define BIGSET_STORE_PREAD_ENV_H_

#include <memory>

#include "leveldb/env.h"

namespace bigset {

// A new Env over `base` (not owned; must outlive the result) that opens
// random-access files with pread and forwards everything else.
std::unique_ptr<leveldb::Env> NewPreadEnv(leveldb::Env* base);

}  // namespace bigset

#endif  // BIGSET_STORE_PREAD_ENV_H_
