// Java's own HashMap/HashSet iteration orders, for tests/unit/test_java_hash_order.py.
//
// Reads one case a line from stdin and prints the keys in the order Java iterates them:
//   map <kind> <capacity> <key>...     new HashMap<>(capacity) (capacity -1: new HashMap<>()), keys put in order
//   copy <kind> <key>...               new HashSet<>(list of the keys)
//   ops <kind> <capacity> (+|-)<key>...   new HashMap<>(capacity), then each key put (+) or removed (-) in order
//   subscribed <name>=<topic id>...    Kafka's UniformHomogeneousAssignmentBuilder topic set: the member's
//                                      subscribed names read into new HashSet<>(list) (ConsumerGroupMember),
//                                      iterated as topic ids (TopicIds) into new HashSet<>(...)
// kind is uuid (Kafka Uuid), string or int. Run with: java HashOrder.java < cases
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;

public class HashOrder {
    /** Kafka's org.apache.kafka.common.Uuid: the same hashCode, equals and compareTo. */
    static final class KafkaUuid implements Comparable<KafkaUuid> {
        final long most;
        final long least;
        final String text;

        KafkaUuid(String text) {
            ByteBuffer bytes = ByteBuffer.wrap(Base64.getUrlDecoder().decode(text));
            this.most = bytes.getLong();
            this.least = bytes.getLong();
            this.text = text;
        }

        @Override public int hashCode() {
            long xor = most ^ least;
            return (int) (xor >> 32) ^ (int) xor;
        }

        @Override public boolean equals(Object o) {
            return o instanceof KafkaUuid && ((KafkaUuid) o).most == most && ((KafkaUuid) o).least == least;
        }

        @Override public int compareTo(KafkaUuid other) {
            if (most != other.most) return most > other.most ? 1 : -1;
            if (least != other.least) return least > other.least ? 1 : -1;
            return 0;
        }

        @Override public String toString() {
            return text;
        }
    }

    static Object key(String kind, String text) {
        switch (kind) {
            case "uuid": return new KafkaUuid(text);
            case "int": return Integer.valueOf(text);
            default: return text;
        }
    }

    static String join(Collection<?> keys) {
        StringJoiner out = new StringJoiner(" ");
        for (Object k : keys) out.add(k.toString());
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "map": {
                    int capacity = Integer.parseInt(f[2]);
                    Map<Object, Boolean> map = capacity < 0 ? new HashMap<>() : new HashMap<>(capacity);
                    for (int i = 3; i < f.length; i++) map.put(key(f[1], f[i]), true);
                    System.out.println(join(map.keySet()));
                    break;
                }
                case "ops": {
                    int capacity = Integer.parseInt(f[2]);
                    Map<Object, Boolean> map = capacity < 0 ? new HashMap<>() : new HashMap<>(capacity);
                    for (int i = 3; i < f.length; i++) {
                        Object k = key(f[1], f[i].substring(1));
                        if (f[i].charAt(0) == '+') map.put(k, true); else map.remove(k);
                    }
                    System.out.println(join(map.keySet()));
                    break;
                }
                case "copy": {
                    List<Object> keys = new ArrayList<>();
                    for (int i = 2; i < f.length; i++) keys.add(key(f[1], f[i]));
                    System.out.println(join(new HashSet<>(keys)));
                    break;
                }
                case "subscribed": {
                    Map<String, KafkaUuid> ids = new HashMap<>();
                    List<String> names = new ArrayList<>();
                    for (int i = 1; i < f.length; i++) {
                        String[] pair = f[i].split("=");
                        names.add(pair[0]);
                        ids.put(pair[0], new KafkaUuid(pair[1]));
                    }
                    List<KafkaUuid> topicIds = new ArrayList<>();
                    for (String name : new HashSet<>(names)) topicIds.add(ids.get(name));
                    System.out.println(join(new HashSet<>(topicIds)));
                    break;
                }
                default:
                    throw new IllegalArgumentException(line);
            }
        }
    }
}
