/* SPDX-License-Identifier: Apache-2.0 */
/* A deep copy of a protobuf-c message, through its wire form: protobuf-c has
 * none of its own. The copy is freed like any unpacked message. */
#ifndef EP_PB_COPY_H
#define EP_PB_COPY_H

#include <protobuf-c/protobuf-c.h>

typedef void *(*ep_pb_unpack_fn)(ProtobufCAllocator *, size_t, const uint8_t *);

/* unpack: the message type's generated __unpack function, cast. NULL when
 * out of memory. */
void *ep_pb_copy(const ProtobufCMessage *m, ep_pb_unpack_fn unpack);

#endif
