"""The built-in web console (opt-in ``consolePort``, loopback unless ``consoleBindAddress``): a
single-page app served from package data and a JSON API that reads and writes through
``pyrmq.client.admin``, the same request codes as mqadmin, never through the broker's objects.
The broker's controller starts it; see README "Operations"."""
