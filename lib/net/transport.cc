#include "bigset/net/transport.h"

namespace bigset {

Transport::~Transport() = default;
Scheduler::~Scheduler() = default;

}  // namespace bigset
