"""ACL 1.0 of the broker, compatible with Apache RocketMQ 4.9: ``aclEnable=true`` makes every
request pass a check before its processor runs (``validator.AclValidator.check``, registered on
the broker's ``ProcessorTable``) against the accounts of ``plain_acl.yml`` (``plain_config``),
reloaded when the file changes (``watcher``). ``resources`` says which topics and groups a
request needs, and which request codes only an admin account may send."""
