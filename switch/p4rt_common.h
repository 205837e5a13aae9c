// SPDX-License-Identifier: Apache-2.0
//
// What every part of the P4Runtime server shares: the protobuf namespaces,
// the server's limits, and the status helpers.
#pragma once

#include "grpc_listen.h"
#include "p4rt_bounds.h"
#include "p4rt_pre.h"
#include "p4rt_writes.h"
#include "switch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/config/v1/p4info.pb.h"
#include "p4/v1/p4runtime.grpc.pb.h"

namespace p4rt_server
{

namespace p4v1 = ::p4::v1;
namespace p4cfg = ::p4::config::v1;
using grpc::Status;
using grpc::StatusCode;

inline constexpr const char *kApiVersion = "1.4.0";
// Read answers are streamed in messages of at most this many entities.
constexpr int kReadBatch = 1000;
// The longest message of one update's p4.v1.Error in a failed Write.
constexpr size_t kMaxErrorMessage = 200;
// Digests the server remembers for de-duplication (ack_timeout_ns): past
// this many, the oldest unacknowledged lists are forgotten.
constexpr size_t kDigestMemory = 4096;

inline Status error(StatusCode code, const std::string &message)
{
	return Status(code, message);
}

// INSERT needs a new key, MODIFY and DELETE an existing one (P4Runtime
// 9.1): the one place that says so for every kind of entity.
inline Status check_presence(p4v1::Update::Type type, bool exists,
			     const std::string &what)
{
	if (type == p4v1::Update::UNSPECIFIED)
		return error(StatusCode::INVALID_ARGUMENT,
			     "update type is unspecified");
	if (type == p4v1::Update::INSERT && exists)
		return error(StatusCode::ALREADY_EXISTS,
			     what + " exists already");
	if (type != p4v1::Update::INSERT && !exists)
		return error(StatusCode::NOT_FOUND, "no " + what);
	return Status::OK;
}

} // namespace p4rt_server
