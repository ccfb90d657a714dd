"""Row families of bench/side_by_side.py (issue 14): each module runs its rows against both server kinds."""
