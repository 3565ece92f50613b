/* SPDX-License-Identifier: Apache-2.0 */
#include "common/profile/pb_copy.h"

#include <stdlib.h>

void *ep_pb_copy(const ProtobufCMessage *m, ep_pb_unpack_fn unpack)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	void *copy = unpack(NULL, len, buf);
	free(buf);
	return copy;
}
