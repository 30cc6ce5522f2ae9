"""Optional adapters to other frameworks (torch), each importing its framework lazily."""
