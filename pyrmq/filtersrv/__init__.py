"""The FilterServer role (``pyrmq filtersrv``): class filtering beside a broker, made safe.

A FilterServer registers with its broker, accepts consumers' filter classes
(REGISTER_MESSAGE_FILTER_CLASS) from an allow-list of groups or names operator-deployed ones, and
answers class-filter pulls by pulling from its broker and keeping what the class accepts. Filter
code never runs in this process: each class runs in a sandboxed worker process (workers.py,
jail.py). docs/FILTERING.md says how to run it.
"""
