package pyrmq.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** `--name value` pairs from the command line; every option takes exactly one value. */
final class Options {
    private final Map<String, String> values = new HashMap<>();

    Options(String[] args, int start) {
        for (int i = start; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected `--name value`, got: " + args[i]);
            }
            values.put(args[i].substring(2), args[i + 1]);
        }
    }

    String str(String name) {
        String v = values.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing required option --" + name);
        }
        return v;
    }

    String str(String name, String dflt) {
        return values.getOrDefault(name, dflt);
    }

    int integer(String name, int dflt) {
        String v = values.get(name);
        return v == null ? dflt : Integer.parseInt(v);
    }

    long millis(String name, long dflt) {
        String v = values.get(name);
        return v == null ? dflt : Long.parseLong(v);
    }

    /** Comma-separated list; an empty string is an empty list. */
    List<String> list(String name) {
        List<String> out = new ArrayList<>();
        String v = values.get(name);
        if (v != null && !v.isEmpty()) {
            for (String s : v.split(",")) {
                out.add(s);
            }
        }
        return out;
    }
}
