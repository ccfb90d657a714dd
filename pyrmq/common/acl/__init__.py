"""Pieces of RocketMQ's ACL 1.0 that more than one role needs: Apache's remote address patterns
(the broker's white addresses, the NameServer's write allow-list) and the request signature the
official clients compute (``AclClientRPCHook``). Pure functions, no I/O."""
