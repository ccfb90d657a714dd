"""Services both roles (NameServer and Broker) use; they may import trio and the store's config
files, never a role or the remoting layer."""
