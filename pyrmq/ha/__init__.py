"""Classic RocketMQ master -> slave replication on the HA port (spec/ha.md)."""
