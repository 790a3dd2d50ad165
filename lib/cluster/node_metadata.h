// The keyspace of a node's own metadata in its store. Internal header.
//
// A node keeps its replicas' keyspaces by partition (0 to ring_size - 1)
// and its own records (rings, membership states, the request-id lease,
// release markers; docs/FORMATS.md, "Node metadata") as metadata keys of
// the last keyspace, which no partition can have (kMaxRingSize is below
// it).

#ifndef BIGSET_LIB_CLUSTER_NODE_METADATA_H_
#define BIGSET_LIB_CLUSTER_NODE_METADATA_H_

#include "bigset/keys/keys.h"

namespace bigset {

inline constexpr KeyspaceId kNodeMetaKeyspace = 0xFFFFFFFF;

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_NODE_METADATA_H_
