// ReadOnlyEnv: a LevelDB Env that lets a database be opened without
// changing any file on disk.
//
// LevelDB has no read-only open: opening replays the write-ahead log into a
// new table and writes a new manifest, and reads can trigger compactions.
// This Env keeps every file LevelDB creates, renames or deletes in memory
// (copy-on-write over the directory on disk), so the database opens and
// reads normally while the files on disk stay byte for byte as they were.
// Memory grows with what LevelDB writes while open: the replayed log (at
// most a write buffer) and any compaction output.
//
// LockFile takes a shared (read) lock on the real lock file, so a process
// that holds the database open for writing makes the open fail, and a writer
// cannot open the database while a read-only one is open.
//
// Thread-safety: safe for concurrent use, like every Env.

#ifndef BIGSET_STORE_READ_ONLY_ENV_H_
#define BIGSET_STORE_READ_ONLY_ENV_H_

#include <memory>

#include "leveldb/env.h"

namespace bigset {

// A new read-only overlay over `base` (not owned; must outlive the result).
std::unique_ptr<leveldb::Env> NewReadOnlyEnv(leveldb::Env* base);

}  // namespace bigset

#endif  // BIGSET_STORE_READ_ONLY_ENV_H_
