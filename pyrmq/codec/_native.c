/*
 * pyrmq.codec._native: the hot loops that pure Python does slowly (issue 14) -- the per-message
 * byte work of the send path, and the NameServer's merge of a registration into its topic queue
 * table. Each function has a pure-Python twin next to the format or table it serves
 * (index_codec, remoting, message_batch, message_props, message, namesrv.route_info), which is
 * the reference: pyrmq.codec.native binds the twin when this extension was not built (no C
 * compiler), and tests/codec/test_native.py proves both write the same bytes, return the same
 * values and refuse the same input.
 *
 * The layouts are the ones the codec declares (construct and struct). The sizes and positions
 * used here are exported as constants and checked against those declarations when a function is
 * bound, so a layout change cannot leave this file behind silently.
 *
 * Sans-I/O like the rest of the codec: buffers in, values out. Every length read is checked
 * before it is used and every write is bounds-checked against the buffer it goes into.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_HEADER_SIZE 40
#define INDEX_SLOT_SIZE 4
#define INDEX_ITEM_SIZE 20
#define TRANSACTION_MASK 0xC
#define TRANSACTION_ROLLBACK_TYPE 0xC
#define KEY_SEPARATOR_CHAR ' '
#define PROPERTY_SEPARATOR_CHAR 0x02   /* between a properties string's name-value pairs */
#define MAX_PROPERTIES_LENGTH 32767

static inline void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put_be64(unsigned char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline int32_t get_be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* ``n`` int arguments into ``out``: 0, or -1 with the exception of the first that is not an int
 * of 64 bits set. */
static int int_args(PyObject *const *args, int n, long long *out)
{
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(args[i]);
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* The two str arguments of a function called as ``usage``: 0, or -1 with a TypeError. */
static int two_str_args(PyObject *const *args, Py_ssize_t nargs, const char *usage)
{
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    return 0;
}

/* Java's String.hashCode continued over the UTF-16 code units of s[start:end] (a code point past
 * the BMP is its surrogate pair, a lone surrogate is its own unit, as Java holds them). */
static uint32_t java_hash_range(uint32_t h, PyObject *s, Py_ssize_t start, Py_ssize_t end)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *u = (const Py_UCS1 *)data;
        for (Py_ssize_t i = start; i < end; i++)
            h = 31u * h + u[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *u = (const Py_UCS2 *)data;
        for (Py_ssize_t i = start; i < end; i++)
            h = 31u * h + u[i];
    } else {
        const Py_UCS4 *u = (const Py_UCS4 *)data;
        for (Py_ssize_t i = start; i < end; i++) {
            Py_UCS4 c = u[i];
            if (c >= 0x10000) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            } else {
                h = 31u * h + c;
            }
        }
    }
    return h;
}

/* The index hash of ``topic#key`` for key = s[start:end]: Java's Math.abs of its hashCode, 0 when
 * that stays negative (Integer.MIN_VALUE). */
static long long topic_key_hash_range(PyObject *topic, PyObject *s, Py_ssize_t start, Py_ssize_t end)
{
    uint32_t h = java_hash_range(0, topic, 0, PyUnicode_GET_LENGTH(topic));
    h = 31u * h + (uint32_t)'#';
    h = java_hash_range(h, s, start, end);
    int64_t v = (int32_t)h;
    if (v < 0)
        v = -v;
    return v > INT32_MAX ? 0 : v;
}

PyDoc_STRVAR(topic_key_hash_doc,
"topic_key_hash(topic, key) -> int\n\n"
"The index hash of the key ``topic#key``: Java's Math.abs of its String.hashCode, 0 when that\n"
"stays negative (Integer.MIN_VALUE).");

static PyObject *topic_key_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (two_str_args(args, nargs, "topic_key_hash(topic: str, key: str)") < 0)
        return NULL;
    return PyLong_FromLongLong(topic_key_hash_range(args[0], args[1], 0, PyUnicode_GET_LENGTH(args[1])));
}

PyDoc_STRVAR(index_put_doc,
"index_put(mm, hash_slot_num, count, key_hash, phy_offset, time_diff, begin_timestamp,\n"
"          end_timestamp, begin_phy_offset, end_phy_offset, hash_slot_count) -> int\n\n"
"Write item ``count`` of an index file (its slot's previous item as its link), point the slot\n"
"at it and write the header with ``count + 1`` items. Returns the header's hash slot count\n"
"(one more when the slot was empty). Raises ValueError when the item is outside ``mm``.");

/* Item ``count`` of an index file at ``base`` (``len`` bytes) and its slot, then the header with
 * ``count + 1`` items: the new hash slot count, or -1 with a ValueError when the item is outside
 * the buffer. The arguments are in their fields' ranges (checked by the callers). */
static long long index_write(unsigned char *base, Py_ssize_t len, long long hash_slot_num, long long count,
                             long long key_hash, long long phy_offset, long long time_diff,
                             const long long header[4], long long hash_slot_count)
{
    long long items_start = INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE;
    long long item_pos = items_start + count * INDEX_ITEM_SIZE;
    if (item_pos + INDEX_ITEM_SIZE > (long long)len) {
        PyErr_SetString(PyExc_ValueError, "index_put: the item is past the end of the file");
        return -1;
    }
    long long slot_pos = INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * INDEX_SLOT_SIZE;
    int32_t slot_value = get_be32(base + slot_pos);
    if (slot_value <= 0 || slot_value > count)
        slot_value = 0;
    unsigned char *item = base + item_pos;
    put_be32(item, (uint32_t)key_hash);
    put_be64(item + 4, (uint64_t)phy_offset);
    put_be32(item + 12, (uint32_t)time_diff);
    put_be32(item + 16, (uint32_t)slot_value);
    put_be32(base + slot_pos, (uint32_t)count);
    if (slot_value == 0)
        hash_slot_count += 1;
    for (int k = 0; k < 4; k++)   /* begin and end timestamps, begin and end offsets */
        put_be64(base + 8 * k, (uint64_t)header[k]);
    put_be32(base + 32, (uint32_t)hash_slot_count);
    put_be32(base + 36, (uint32_t)(count + 1));
    return hash_slot_count;
}

/* The fields index_put and index_build_records check alike: 0, or -1 with a ValueError. */
static int index_fields_in_range(long long hash_slot_num, long long count, long long time_diff,
                                 long long hash_slot_count)
{
    if (hash_slot_num <= 0 || count < 0 || count >= INT32_MAX || time_diff < INT32_MIN || time_diff > INT32_MAX
        || hash_slot_count < INT32_MIN || hash_slot_count >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_put: an argument is out of its field's range");
        return -1;
    }
    return 0;
}

static PyObject *index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "index_put takes 11 arguments");
        return NULL;
    }
    long long v[10];
    if (int_args(args + 1, 10, v) < 0)
        return NULL;
    long long hash_slot_num = v[0], count = v[1], key_hash = v[2], phy_offset = v[3], time_diff = v[4];
    long long header[4] = {v[5], v[6], v[7], v[8]};
    if (index_fields_in_range(hash_slot_num, count, time_diff, v[9]) < 0)
        return NULL;
    if (key_hash < 0 || key_hash > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "index_put: an argument is out of its field's range");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    long long hash_slot_count = index_write((unsigned char *)view.buf, view.len, hash_slot_num, count, key_hash,
                                            phy_offset, time_diff, header, v[9]);
    PyBuffer_Release(&view);
    return hash_slot_count < 0 ? NULL : PyLong_FromLongLong(hash_slot_count);
}

/* The (bytes-like, int limit) arguments of the splitters below: 0, or -1 with an exception set.
 * On success the caller releases ``view``. */
static int buffer_and_limit(PyObject *const *args, Py_ssize_t nargs, const char *usage, Py_buffer *view,
                            Py_ssize_t *limit)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    *limit = PyLong_AsSsize_t(args[1]);
    if (*limit == -1 && PyErr_Occurred())
        return -1;
    return PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE);
}

/* ---- remoting: the extFields of a ROCKETMQ binary header ---- */

PyDoc_STRVAR(decode_ext_fields_doc,
"decode_ext_fields(data, max_fields) -> dict[str, str]\n\n"
"The extFields of a ROCKETMQ header: (uint16 key length, key, uint32 value length, value) until\n"
"the end of ``data``, UTF-8; empty keys and values dropped, the last duplicate kept. Raises\n"
"ValueError when a length overruns ``data`` or more than ``max_fields`` entries are kept,\n"
"UnicodeDecodeError for text that is not UTF-8.");

/* The extFields entries in p[0:end] as a dict, or NULL with an exception (decode_ext_fields). */
static PyObject *ext_fields_of(const unsigned char *p, Py_ssize_t end, Py_ssize_t max_fields)
{
    Py_ssize_t pos = 0;
    PyObject *ext = PyDict_New();
    if (ext == NULL)
        return NULL;
    while (pos < end) {
        if (PyDict_GET_SIZE(ext) >= max_fields) {
            PyErr_Format(PyExc_ValueError, "more than %zd extFields entries", max_fields);
            goto fail;
        }
        if (end - pos < 2) {
            PyErr_SetString(PyExc_ValueError, "truncated extFields key length");
            goto fail;
        }
        Py_ssize_t key_len = ((Py_ssize_t)p[pos] << 8) | p[pos + 1];
        pos += 2;
        if (end - pos < key_len + 4) {
            PyErr_SetString(PyExc_ValueError, "extFields key overruns the header");
            goto fail;
        }
        Py_ssize_t key_at = pos;
        pos += key_len;
        uint32_t val_len32 = (uint32_t)get_be32(p + pos);
        pos += 4;
        if ((uint64_t)val_len32 > (uint64_t)(end - pos)) {
            PyErr_SetString(PyExc_ValueError, "extFields value overruns the header");
            goto fail;
        }
        Py_ssize_t val_len = (Py_ssize_t)val_len32;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)p + key_at, key_len, NULL);
        if (key == NULL)
            goto fail;
        PyObject *value = PyUnicode_DecodeUTF8((const char *)p + pos, val_len, NULL);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        pos += val_len;
        int rc = 0;
        if (key_len && val_len)   /* Java decodes zero-length keys/values as null and drops them */
            rc = PyDict_SetItem(ext, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    return ext;
fail:
    Py_DECREF(ext);
    return NULL;
}

/* A decoder of (data, max_fields) over its buffer: ``decode(bytes, size, max_fields)``. */
static PyObject *decode_buffer(PyObject *const *args, Py_ssize_t nargs, const char *usage,
                               PyObject *(*decode)(const unsigned char *, Py_ssize_t, Py_ssize_t))
{
    Py_buffer view;
    Py_ssize_t max_fields;
    if (buffer_and_limit(args, nargs, usage, &view, &max_fields) < 0)
        return NULL;
    PyObject *result = decode((const unsigned char *)view.buf, view.len, max_fields);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *decode_ext_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return decode_buffer(args, nargs, "decode_ext_fields(data, max_fields)", ext_fields_of);
}

#define ROCKETMQ_FIXED_SIZE 13   /* int16 code, uint8 language, int16 version, int32 opaque, int32 flag */
#define FRAME_PREFIX_SIZE 8      /* uint32 length, uint32 serialize type << 24 | header length */
#define ROCKETMQ_SERIALIZE_TYPE 1
#define MAX_HEADER_LENGTH 0xFFFFFF

PyDoc_STRVAR(decode_rocketmq_header_doc,
"decode_rocketmq_header(data, max_fields) -> (code, language, version, opaque, flag, remark, ext)\n\n"
"The members of a ROCKETMQ binary header: the fixed part, the remark (uint32 length, UTF-8; None\n"
"when empty) and the extFields (uint32 length, which must be what is left; None when 0), decoded\n"
"as decode_ext_fields does. Raises ValueError when a length does not fit the header,\n"
"UnicodeDecodeError for text that is not UTF-8.");

static PyObject *rocketmq_header_of(const unsigned char *p, Py_ssize_t size, Py_ssize_t max_fields)
{
    Py_ssize_t pos = ROCKETMQ_FIXED_SIZE;
    PyObject *remark = NULL, *ext = NULL, *result = NULL;
    if (size < ROCKETMQ_FIXED_SIZE + 8) {
        PyErr_Format(PyExc_ValueError, "ROCKETMQ header of %zd bytes is shorter than its fixed part", size);
        return NULL;
    }
    uint32_t remark_len = (uint32_t)get_be32(p + pos);
    pos += 4;
    if ((uint64_t)remark_len > (uint64_t)(size - pos - 4)) {
        PyErr_Format(PyExc_ValueError, "remark length %lu exceeds the header", (unsigned long)remark_len);
        return NULL;
    }
    remark = remark_len ? PyUnicode_DecodeUTF8((const char *)p + pos, (Py_ssize_t)remark_len, NULL)
                        : Py_NewRef(Py_None);
    if (remark == NULL)
        return NULL;
    pos += (Py_ssize_t)remark_len;
    uint32_t ext_len = (uint32_t)get_be32(p + pos);
    pos += 4;
    if ((uint64_t)ext_len != (uint64_t)(size - pos)) {
        PyErr_Format(PyExc_ValueError, "extFields length %lu does not match the header (%zd left)",
                     (unsigned long)ext_len, size - pos);
    } else if ((ext = ext_len ? ext_fields_of(p + pos, size - pos, max_fields) : Py_NewRef(Py_None)) != NULL) {
        result = Py_BuildValue("(iiiiiOO)", (int)(int16_t)(((unsigned)p[0] << 8) | p[1]), (int)p[2],
                               (int)(int16_t)(((unsigned)p[3] << 8) | p[4]), (int)get_be32(p + 5),
                               (int)get_be32(p + 9), remark, ext);
    }
    Py_DECREF(remark);
    Py_XDECREF(ext);
    return result;
}

static PyObject *decode_rocketmq_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return decode_buffer(args, nargs, "decode_rocketmq_header(data, max_fields)", rocketmq_header_of);
}

PyDoc_STRVAR(decode_frames_doc,
"decode_frames(buffer, pos, max_frame_bytes, max_header_bytes, max_fields) -> (frames, end)\n\n"
"The complete frames with a ROCKETMQ header in ``buffer`` from ``pos``, each as (code,\n"
"language, version, opaque, flag, remark, ext, body) -- the header as decode_rocketmq_header\n"
"decodes it, the body as bytes (None when empty) -- and where the next frame starts. Stops\n"
"before the first frame that is not whole, has a JSON header or breaks a rule (a frame longer\n"
"than ``max_frame_bytes`` with its length word, a length word below 4, a header longer than the\n"
"frame or than ``max_header_bytes``, a header that does not decode): the caller's full decoder\n"
"takes that one.");

static PyObject *decode_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long n[4];
    Py_buffer view;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_frames(buffer, pos, max_frame_bytes, max_header_bytes, max_fields)");
        return NULL;
    }
    if (int_args(args + 1, 4, n) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    long long size = view.len, pos = n[0];
    PyObject *frames = NULL;
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative position");
        goto fail;
    }
    if ((frames = PyList_New(0)) == NULL)
        goto fail;
    while (size - pos >= FRAME_PREFIX_SIZE) {
        long long length = (uint32_t)get_be32(p + pos);
        uint32_t header_word = (uint32_t)get_be32(p + pos + 4);
        long long header_len = header_word & 0xFFFFFF;
        if (length + 4 > n[1] || length < 4 || header_word >> 24 != ROCKETMQ_SERIALIZE_TYPE
            || header_len > length - 4 || header_len > n[2] || size - pos < 4 + length)
            break;
        const unsigned char *header = p + pos + FRAME_PREFIX_SIZE;
        PyObject *members = rocketmq_header_of(header, (Py_ssize_t)header_len, (Py_ssize_t)n[3]);
        if (members == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError))   /* UnicodeDecodeError is one */
                goto fail;
            PyErr_Clear();   /* the full decoder says what is wrong with it */
            break;
        }
        long long body_len = length - 4 - header_len;
        PyObject *body = body_len ? PyBytes_FromStringAndSize((const char *)header + header_len, (Py_ssize_t)body_len)
                                  : Py_NewRef(Py_None);
        PyObject *frame = body == NULL ? NULL : PyTuple_New(8);
        if (frame == NULL) {
            Py_DECREF(members);
            Py_XDECREF(body);
            goto fail;
        }
        for (Py_ssize_t k = 0; k < 7; k++)
            PyTuple_SET_ITEM(frame, k, Py_NewRef(PyTuple_GET_ITEM(members, k)));
        PyTuple_SET_ITEM(frame, 7, body);
        Py_DECREF(members);
        int rc = PyList_Append(frames, frame);
        Py_DECREF(frame);
        if (rc < 0)
            goto fail;
        pos += 4 + length;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NL)", frames, pos);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(frames);
    return NULL;
}

PyDoc_STRVAR(encode_ext_fields_doc,
"encode_ext_fields(ext) -> bytes\n\n"
"The extFields part of a ROCKETMQ header, its int32 length first: each entry whose key and\n"
"value are not None as (int16 length, UTF-8 key, int32 length, UTF-8 value). Raises\n"
"ValueError for a key longer than 65,535 bytes, UnicodeEncodeError for text UTF-8 cannot hold.");

/* The size of ext's entries as encode_ext_fields writes them (without the length word): 0 or
 * more, or -1 with an exception. Leaves every key's and value's UTF-8 cached for the write. */
static Py_ssize_t ext_fields_size(PyObject *ext)
{
    Py_ssize_t total = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &i, &key, &value)) {
        if (key == Py_None || value == Py_None)
            continue;
        if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "extFields keys and values are str");
            return -1;
        }
        Py_ssize_t kn, vn;
        if (PyUnicode_AsUTF8AndSize(key, &kn) == NULL || PyUnicode_AsUTF8AndSize(value, &vn) == NULL)
            return -1;
        if (kn > 0xFFFF) {
            PyErr_SetString(PyExc_ValueError, "extFields key longer than 65535 bytes");
            return -1;
        }
        if (vn > 0x7FFFFFFF || total > PY_SSIZE_T_MAX - 6 - kn - vn) {
            PyErr_SetString(PyExc_ValueError, "extFields value too long");
            return -1;
        }
        total += 6 + kn + vn;
    }
    if (total > 0x7FFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "extFields too long");
        return -1;
    }
    return total;
}

/* Write ext's entries at w (ext_fields_size bytes, sized and checked by it); returns the end. */
static unsigned char *ext_fields_write(PyObject *ext, unsigned char *w)
{
    Py_ssize_t i = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &i, &key, &value)) {
        if (key == Py_None || value == Py_None)
            continue;
        Py_ssize_t kn, vn;
        const char *kb = PyUnicode_AsUTF8AndSize(key, &kn);   /* cached by ext_fields_size */
        const char *vb = PyUnicode_AsUTF8AndSize(value, &vn);
        w[0] = (unsigned char)(kn >> 8);
        w[1] = (unsigned char)kn;
        memcpy(w + 2, kb, (size_t)kn);
        w += 2 + kn;
        put_be32(w, (uint32_t)vn);
        memcpy(w + 4, vb, (size_t)vn);
        w += 4 + vn;
    }
    return w;
}

static PyObject *encode_ext_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_ext_fields(ext: dict)");
        return NULL;
    }
    /* two passes: the sizes, then the bytes into one buffer of exactly that size */
    Py_ssize_t total = ext_fields_size(args[0]);
    if (total < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 + total);
    if (out == NULL)
        return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    put_be32(w, (uint32_t)total);
    ext_fields_write(args[0], w + 4);
    return out;
}

static PyObject *struct_error;   /* struct.error, what the twin's packing raises (set in native_exec) */

PyDoc_STRVAR(encode_rocketmq_frame_head_doc,
"encode_rocketmq_frame_head(code, language, version, opaque, flag, remark, ext, body_len) -> bytes\n\n"
"The start of a frame with a ROCKETMQ header, up to its body of ``body_len`` bytes: the length\n"
"words, the fixed part (``language`` as its code), the remark (None or empty: none) and the\n"
"extFields as encode_ext_fields writes them. Raises struct.error for a member outside its\n"
"type, ValueError for a header or a frame too long for its length word, and what\n"
"encode_ext_fields raises.");

static PyObject *encode_rocketmq_frame_head(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    long long n[5], body_len;
    if (nargs != 8 || !PyDict_Check(args[6]) || (args[5] != Py_None && !PyUnicode_Check(args[5]))) {
        PyErr_SetString(PyExc_TypeError, "encode_rocketmq_frame_head(code, language, version, opaque, flag, "
                                         "remark: str | None, ext: dict, body_len)");
        return NULL;
    }
    if (int_args(args, 5, n) < 0 || int_args(args + 7, 1, &body_len) < 0)
        return NULL;
    if (n[0] < INT16_MIN || n[0] > INT16_MAX || n[1] < 0 || n[1] > 255 || n[2] < INT16_MIN || n[2] > INT16_MAX
        || n[3] < INT32_MIN || n[3] > INT32_MAX || n[4] < INT32_MIN || n[4] > INT32_MAX) {
        PyErr_SetString(struct_error, "a header member is outside its type");
        return NULL;
    }
    Py_ssize_t remark_len = 0;
    const char *remark = NULL;
    if (args[5] != Py_None && (remark = PyUnicode_AsUTF8AndSize(args[5], &remark_len)) == NULL)
        return NULL;
    Py_ssize_t ext_len = ext_fields_size(args[6]);
    if (ext_len < 0)
        return NULL;
    Py_ssize_t header_len = ROCKETMQ_FIXED_SIZE + 4 + remark_len + 4 + ext_len;
    if (header_len > MAX_HEADER_LENGTH || body_len < 0 || body_len > 0xFFFFFFFFLL - 4 - header_len) {
        PyErr_SetString(PyExc_ValueError, "the header or the frame is too long for its length word");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, FRAME_PREFIX_SIZE + header_len);
    if (out == NULL)
        return NULL;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    put_be32(w, (uint32_t)(4 + header_len + body_len));
    put_be32(w + 4, (uint32_t)(ROCKETMQ_SERIALIZE_TYPE << 24 | header_len));
    w += FRAME_PREFIX_SIZE;
    w[0] = (unsigned char)((uint16_t)n[0] >> 8);
    w[1] = (unsigned char)n[0];
    w[2] = (unsigned char)n[1];
    w[3] = (unsigned char)((uint16_t)n[2] >> 8);
    w[4] = (unsigned char)n[2];
    put_be32(w + 5, (uint32_t)n[3]);
    put_be32(w + 9, (uint32_t)n[4]);
    w += ROCKETMQ_FIXED_SIZE;
    put_be32(w, (uint32_t)remark_len);
    if (remark_len)
        memcpy(w + 4, remark, (size_t)remark_len);
    w += 4 + remark_len;
    put_be32(w, (uint32_t)ext_len);
    ext_fields_write(args[6], w + 4);
    return out;
}

/* ---- the body of a SEND_BATCH_MESSAGE ---- */

#define BATCH_ENTRY_HEAD_SIZE 20   /* TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN */
#define BATCH_ENTRY_OVERHEAD (BATCH_ENTRY_HEAD_SIZE + 2)

PyDoc_STRVAR(split_batch_doc,
"split_batch(body, max_entries, suffix=None) -> list[tuple[int, bytes, str]]\n\n"
"The (flag, body, properties) of each entry of a batch send body, every length checked before\n"
"it is used. With a ``suffix`` (the batch's own properties), each entry's properties end with\n"
"it as its stored record holds them: a separator between the two when both are non-empty and\n"
"the entry's do not end with one. Raises ValueError for a body that does not split into whole\n"
"entries, has more than ``max_entries`` of them, or properties that are not UTF-8.");

static PyObject *split_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    const char *suffix = NULL;
    Py_ssize_t suffix_len = 0;
    if (nargs == 3 && args[2] != Py_None) {
        if (!PyUnicode_Check(args[2])) {
            PyErr_SetString(PyExc_TypeError, "split_batch: the suffix is a str or None");
            return NULL;
        }
        if ((suffix = PyUnicode_AsUTF8AndSize(args[2], &suffix_len)) == NULL)
            return NULL;
    }
    Py_buffer view;
    Py_ssize_t max_entries;
    if (buffer_and_limit(args, nargs == 3 ? 2 : nargs, "split_batch(body, max_entries, suffix=None)", &view,
                         &max_entries) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, pos = 0;
    /* an entry's properties, a separator and the suffix, decoded in one go */
    char *joined = suffix_len ? PyMem_Malloc((size_t)(MAX_PROPERTIES_LENGTH + 1 + suffix_len)) : NULL;
    PyObject *out = suffix_len && joined == NULL ? PyErr_NoMemory() : PyList_New(0);
    if (out == NULL)
        goto fail;
    while (pos < n) {
        if (PyList_GET_SIZE(out) >= max_entries) {
            PyErr_Format(PyExc_ValueError, "batch has more than %zd entries", max_entries);
            goto fail;
        }
        if (n - pos < BATCH_ENTRY_OVERHEAD) {
            PyErr_Format(PyExc_ValueError, "truncated batch entry at %zd", pos);
            goto fail;
        }
        int32_t total_size = get_be32(p + pos);
        int32_t flag = get_be32(p + pos + 12);
        int32_t body_length = get_be32(p + pos + 16);
        if (total_size < BATCH_ENTRY_OVERHEAD || total_size > n - pos) {
            PyErr_Format(PyExc_ValueError, "batch entry size %d at %zd out of range", (int)total_size, pos);
            goto fail;
        }
        Py_ssize_t end = pos + total_size;
        Py_ssize_t q = pos + BATCH_ENTRY_HEAD_SIZE;
        if (body_length < 0 || q + body_length + 2 > end) {
            PyErr_Format(PyExc_ValueError, "batch entry body length %d at %zd out of range", (int)body_length, pos);
            goto fail;
        }
        Py_ssize_t body_at = q;
        q += body_length;
        int16_t prop_length = (int16_t)(((uint16_t)p[q] << 8) | p[q + 1]);
        q += 2;
        if (prop_length < 0 || q + prop_length != end) {
            PyErr_Format(PyExc_ValueError, "batch entry at %zd: size does not match its lengths", pos);
            goto fail;
        }
        PyObject *props;
        if (joined == NULL) {
            props = PyUnicode_DecodeUTF8((const char *)p + q, prop_length, NULL);
        } else {
            /* a suffix's UTF-8 starts with no continuation byte: the two decode as one exactly
             * when the entry's properties do */
            Py_ssize_t k = prop_length;
            memcpy(joined, p + q, (size_t)prop_length);
            if (prop_length > 0 && p[q + prop_length - 1] != PROPERTY_SEPARATOR_CHAR)
                joined[k++] = PROPERTY_SEPARATOR_CHAR;
            memcpy(joined + k, suffix, (size_t)suffix_len);
            props = PyUnicode_DecodeUTF8(joined, k + suffix_len, NULL);
        }
        if (props == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                goto fail;
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "batch entry at %zd: properties are not UTF-8", pos);
            goto fail;
        }
        PyObject *entry = PyTuple_New(3), *flag_obj = PyLong_FromLong(flag),
                 *body_obj = PyBytes_FromStringAndSize((const char *)p + body_at, (Py_ssize_t)body_length);
        if (entry == NULL || flag_obj == NULL || body_obj == NULL) {
            Py_XDECREF(entry);
            Py_XDECREF(flag_obj);
            Py_XDECREF(body_obj);
            Py_DECREF(props);
            goto fail;
        }
        PyTuple_SET_ITEM(entry, 0, flag_obj);
        PyTuple_SET_ITEM(entry, 1, body_obj);
        PyTuple_SET_ITEM(entry, 2, props);
        int rc = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (rc < 0)
            goto fail;
        pos = end;
    }
    PyMem_Free(joined);
    PyBuffer_Release(&view);
    return out;
fail:
    PyMem_Free(joined);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- a message's properties string ---- */

PyDoc_STRVAR(string_to_properties_doc,
"string_to_properties(s) -> dict[str, str]\n\n"
"Java's string2messageProperties: ``name \\x01 value`` pairs separated by ``\\x02``; a pair whose\n"
"name or value is empty (or that has no \\x01) is dropped, the last duplicate wins. None or ''\n"
"gives {}.");

static PyObject *string_to_properties(PyObject *module, PyObject *s)
{
    PyObject *result = PyDict_New();
    if (result == NULL || s == Py_None)
        return result;
    if (!PyUnicode_Check(s)) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_TypeError, "string_to_properties(s: str | None)");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), start = 0;
    if (n == 0)
        return result;
    while (start <= n) {
        Py_ssize_t sep = PyUnicode_FindChar(s, PROPERTY_SEPARATOR_CHAR, start, n, 1);
        if (sep == -2)
            goto fail;
        if (sep == -1)
            sep = n;
        Py_ssize_t p = PyUnicode_FindChar(s, 0x01, start, sep, 1);
        if (p == -2)
            goto fail;
        /* the first \x01 must be neither the first nor the last character of the pair */
        if (p > start && p < sep - 1) {
            PyObject *name = PyUnicode_Substring(s, start, p);
            if (name == NULL)
                goto fail;
            PyObject *value = PyUnicode_Substring(s, p + 1, sep);
            if (value == NULL) {
                Py_DECREF(name);
                goto fail;
            }
            int rc = PyDict_SetItem(result, name, value);
            Py_DECREF(name);
            Py_DECREF(value);
            if (rc < 0)
                goto fail;
        }
        start = sep + 1;
    }
    return result;
fail:
    Py_DECREF(result);
    return NULL;
}

PyDoc_STRVAR(property_value_doc,
"property_value(properties, name) -> str | None\n\n"
"The value of ``name`` (given with its trailing \\x01) in a properties string without splitting\n"
"it: string_to_properties' answer (the last occurrence with a non-empty value). Raises\n"
"ValueError for an empty name.");

/* Where the value of the property ``name`` (with its \x01) is in ``s``: 1 with [*start, *stop),
 * 0 when it has no non-empty value, -1 with an exception set. The last pair of that name with a
 * value wins, as in the map Java builds from the string. */
static int property_range(PyObject *s, PyObject *name, Py_ssize_t *start, Py_ssize_t *stop)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), name_len = PyUnicode_GET_LENGTH(name), end = n;
    for (;;) {
        Py_ssize_t i = PyUnicode_Find(s, name, 0, end, -1);
        if (i == -2)
            return -1;
        if (i == -1)
            return 0;
        /* a name starts the string or follows a pair's \x02 */
        if (i == 0 || PyUnicode_READ_CHAR(s, i - 1) == PROPERTY_SEPARATOR_CHAR) {
            Py_ssize_t first = i + name_len;
            Py_ssize_t last = PyUnicode_FindChar(s, PROPERTY_SEPARATOR_CHAR, first, n, 1);
            if (last == -2)
                return -1;
            if (last == -1)
                last = n;
            if (last > first) {
                *start = first;
                *stop = last;
                return 1;
            }
        }
        end = i;
    }
}

static PyObject *property_value(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (two_str_args(args, nargs, "property_value(properties: str, name: str)") < 0)
        return NULL;
    if (PyUnicode_GET_LENGTH(args[1]) == 0) {
        PyErr_SetString(PyExc_ValueError, "property_value: empty name");
        return NULL;
    }
    Py_ssize_t start, stop;
    int found = property_range(args[0], args[1], &start, &stop);
    if (found < 0)
        return NULL;
    if (found == 0)
        Py_RETURN_NONE;
    return PyUnicode_Substring(args[0], start, stop);
}

static PyObject *record_attr_names[5];   /* RecordInfo's members index_build_records reads (native_exec) */

/* A record's member ``k`` of record_attr_names as a long long: 0, or -1 with an exception set. */
static int record_int(PyObject *record, int k, long long *out)
{
    PyObject *v = PyObject_GetAttr(record, record_attr_names[k]);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The key ranges of one record's properties string: UNIQ_KEY's value, then each non-empty
 * KEY_SEPARATOR-separated token of KEYS. Returns how many (at most ``max``; -1 with an exception
 * set on error). */
static Py_ssize_t index_key_ranges(PyObject *props, PyObject *uniq_name, PyObject *keys_name,
                                   Py_ssize_t (*ranges)[2], Py_ssize_t max, Py_ssize_t *total)
{
    Py_ssize_t n = 0, start, stop;
    *total = 0;
    int found = property_range(props, uniq_name, &start, &stop);
    if (found < 0)
        return -1;
    if (found) {
        if (n < max) {
            ranges[n][0] = start;
            ranges[n][1] = stop;
            n++;
        }
        (*total)++;
    }
    found = property_range(props, keys_name, &start, &stop);
    if (found < 0)
        return -1;
    if (found) {
        Py_ssize_t i = start;
        while (i < stop) {
            Py_ssize_t j = PyUnicode_FindChar(props, KEY_SEPARATOR_CHAR, i, stop, 1);
            if (j == -2)
                return -1;
            if (j == -1)
                j = stop;
            if (j > i) {
                if (n < max) {
                    ranges[n][0] = i;
                    ranges[n][1] = j;
                    n++;
                }
                (*total)++;
            }
            i = j + 1;
        }
    }
    return n;
}

#define INDEX_KEYS_IN_ONE_GO 16

PyDoc_STRVAR(index_build_records_doc,
"index_build_records(mm, hash_slot_num, count_limit, records, start, uniq_key_name, keys_name,\n"
"                    count, hash_slot_count, begin_timestamp, begin_phy_offset, end_phy_offset,\n"
"                    end_timestamp) -> (stop, count, hash_slot_count, end_phy_offset, end_timestamp)\n\n"
"Index the keys of records[start:] (RecordInfo: topic, commit_log_offset, store_timestamp,\n"
"sys_flag, properties_string) into one index file, as IndexService.build_index does record by\n"
"record: UNIQ_KEY and each non-empty KEYS token, each an index_put of ``topic#key``; records\n"
"below ``end_phy_offset``, rolled back or without keys are skipped. It stops at the first record\n"
"it leaves to that function: the file's first item (it sets the file's begin), all of a\n"
"record's keys not fitting below ``count_limit``, or more than 16 keys. Returns where it\n"
"stopped (len(records) when done) and the file's new state.");

static PyObject *index_build_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "index_build_records takes 13 arguments");
        return NULL;
    }
    PyObject *records = args[3], *uniq_name = args[5], *keys_name = args[6];
    if (!PyList_Check(records) || !PyUnicode_Check(uniq_name) || !PyUnicode_Check(keys_name)
        || PyUnicode_GET_LENGTH(uniq_name) == 0 || PyUnicode_GET_LENGTH(keys_name) == 0) {
        PyErr_SetString(PyExc_TypeError, "index_build_records: records must be a list and the names non-empty str");
        return NULL;
    }
    long long a[3], v[6];
    if (int_args(args + 1, 2, a) < 0 || int_args(args + 4, 1, a + 2) < 0 || int_args(args + 7, 6, v) < 0)
        return NULL;
    long long hash_slot_num = a[0], count_limit = a[1], start = a[2];
    long long count = v[0], hash_slot_count = v[1], begin_timestamp = v[2], begin_phy = v[3];
    long long end_phy = v[4], end_timestamp = v[5];
    if (index_fields_in_range(hash_slot_num, count, 0, hash_slot_count) < 0)
        return NULL;
    if (count_limit > INT32_MAX - 1)
        count_limit = INT32_MAX - 1;   /* the header's count stays an int */
    Py_ssize_t n = PyList_GET_SIZE(records), i = start < 0 ? 0 : (Py_ssize_t)(start > n ? n : start);
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    for (; i < n; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        long long phy, timestamp, sys_flag;
        if (record_int(record, 1, &phy) < 0 || record_int(record, 2, &timestamp) < 0
            || record_int(record, 3, &sys_flag) < 0)
            goto fail;
        if (phy < end_phy || (sys_flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK_TYPE)
            continue;
        PyObject *topic = PyObject_GetAttr(record, record_attr_names[0]);
        if (topic == NULL)
            goto fail;
        PyObject *props = PyObject_GetAttr(record, record_attr_names[4]);
        if (props == NULL) {
            Py_DECREF(topic);
            goto fail;
        }
        if (!PyUnicode_Check(topic) || !PyUnicode_Check(props)) {
            PyErr_SetString(PyExc_TypeError, "index_build_records: a record's topic or properties is not a str");
            Py_DECREF(topic);
            Py_DECREF(props);
            goto fail;
        }
        Py_ssize_t ranges[INDEX_KEYS_IN_ONE_GO][2], total = 0;
        Py_ssize_t keys = index_key_ranges(props, uniq_name, keys_name, ranges, INDEX_KEYS_IN_ONE_GO, &total);
        int stop = keys >= 0 && total > 0 && (total > keys || count <= 1 || count + total > count_limit);
        if (keys > 0 && !stop) {
            /* Java: long division truncating toward zero, then clamped to [0, Int.MAX] */
            long long delta = timestamp - begin_timestamp;
            long long time_diff = begin_timestamp <= 0 || delta < 0 ? 0
                                  : delta < (INT32_MAX + 1LL) * 1000 ? delta / 1000 : INT32_MAX;
            long long header[4] = {begin_timestamp, timestamp, begin_phy, phy};
            for (Py_ssize_t k = 0; k < keys; k++) {
                hash_slot_count = index_write((unsigned char *)view.buf, view.len, hash_slot_num, count,
                                              topic_key_hash_range(topic, props, ranges[k][0], ranges[k][1]),
                                              phy, time_diff, header, hash_slot_count);
                if (hash_slot_count < 0)
                    break;
                count += 1;
            }
            end_phy = phy;
            end_timestamp = timestamp;
        }
        Py_DECREF(topic);
        Py_DECREF(props);
        if (keys < 0 || hash_slot_count < 0)
            goto fail;
        if (stop)
            break;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLLLL)", i, count, hash_slot_count, end_phy, end_timestamp);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- a CommitLog record ---- */

#define QUEUE_OFFSET_POSITION 20
#define PHYSICAL_OFFSET_POSITION 28

#define RECORD_PREFIX_V4_SIZE 88   /* TOTALSIZE .. BODYLEN with both hosts IPv4; +12 per IPv6 host */
#define MAGIC_CODE_V1 (-626843481)   /* 0xDAA320A7: a one-byte topic length */
#define MAGIC_CODE_V2 (-626843477)   /* 0xDAA320AB: a two-byte topic length */
#define MAX_TOPIC_LENGTH_V1 127
#define BORNHOST_V6_FLAG 0x10
#define STOREHOSTADDRESS_V6_FLAG 0x20

static PyObject *zlib_crc32;   /* zlib_ng's crc32, the CRC the twin takes (set in native_exec) */

/* The fields of a record besides its topic, properties and body. ``in_range`` is 0 when one of
 * them does not fit the type the twin packs it into: struct.error, raised (as the twin packs
 * them) only when the record is to be written. */
typedef struct {
    long long queue_id, flag, sys_flag, born_timestamp, born_port, store_port, reconsume_times,
        prepared_transaction_offset, queue_offset, physical_offset, store_timestamp;
    unsigned long long host_bits;   /* sys_flag's bits as the twin's ``sys_flag >> 4 & 3`` reads any int */
    const char *born_ip, *store_ip;
    Py_ssize_t born_ip_len, store_ip_len;
    int in_range;
} record_fields;

/* An int field of ``bits`` (32 or 64): 0, or -1 with TypeError for what is not an int; one
 * outside the type clears ``in_range``. */
static int packed_field(PyObject *v, int bits, long long *out, int *in_range)
{
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow || (bits == 32 && (*out < INT32_MIN || *out > INT32_MAX)))
        *in_range = 0;
    return 0;
}

/* A sum of two offsets that the twin packs as int64. */
static long long packed_sum(long long a, long long b, int *in_range)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) {
        *in_range = 0;
        return 0;
    }
    return a + b;
}

/* The checks and the write of encode_record (see its doc) into ``out``: 0 with ``*size`` (minus
 * the size when it does not fit), or -1 with the exception. */
static int record_write(Py_buffer *out, long long pos, long long limit, PyObject *topic_obj, PyObject *props_obj,
                        PyObject *body_obj, const record_fields *r, long long *size)
{
    if (!PyUnicode_Check(topic_obj) || !PyUnicode_Check(props_obj)) {
        PyErr_SetString(PyExc_TypeError, "encode_record: the topic and the properties are str");
        return -1;
    }
    Py_ssize_t topic_len, props_len;
    const char *topic = PyUnicode_AsUTF8AndSize(topic_obj, &topic_len);
    if (topic == NULL)
        return -1;
    const char *props = PyUnicode_AsUTF8AndSize(props_obj, &props_len);
    if (props == NULL)
        return -1;
    if (props_len > MAX_PROPERTIES_LENGTH) {
        PyErr_Format(PyExc_ValueError, "properties length %zd > %d", props_len, MAX_PROPERTIES_LENGTH);
        return -1;
    }
    if (topic_len > 32767) {
        PyErr_Format(PyExc_ValueError, "topic length %zd does not fit a record", topic_len);
        return -1;
    }
    if (r->born_ip_len != ((r->host_bits & BORNHOST_V6_FLAG) ? 16 : 4)
        || r->store_ip_len != ((r->host_bits & STOREHOSTADDRESS_V6_FLAG) ? 16 : 4)) {
        PyErr_SetString(PyExc_ValueError, "encode_record: the host addresses do not match the sysFlag's host bits");
        return -1;
    }
    if (pos < 0 || limit < pos || limit > out->len) {
        PyErr_SetString(PyExc_ValueError, "encode_record: the position or the limit is outside the buffer");
        return -1;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(body_obj, &body, PyBUF_SIMPLE) < 0)
        return -1;
    int v1 = topic_len <= MAX_TOPIC_LENGTH_V1;
    long long total = RECORD_PREFIX_V4_SIZE + (r->born_ip_len - 4) + (r->store_ip_len - 4) + body.len
                      + (v1 ? 1 : 2) + topic_len + 2 + props_len;
    if (total > limit - pos) {
        PyBuffer_Release(&body);
        *size = -total;
        return 0;
    }
    if (!r->in_range || total > INT32_MAX || body.len > INT32_MAX) {
        PyBuffer_Release(&body);
        PyErr_SetString(struct_error, "a record field is outside its type");
        return -1;
    }
    PyObject *crc_obj = PyObject_CallOneArg(zlib_crc32, body_obj);
    unsigned long crc = crc_obj == NULL ? (unsigned long)-1 : PyLong_AsUnsignedLong(crc_obj);
    Py_XDECREF(crc_obj);
    if (crc == (unsigned long)-1 && PyErr_Occurred()) {
        PyBuffer_Release(&body);
        return -1;
    }
    unsigned char *w = (unsigned char *)out->buf + pos;
    put_be32(w, (uint32_t)total);
    put_be32(w + 4, (uint32_t)(v1 ? MAGIC_CODE_V1 : MAGIC_CODE_V2));
    put_be32(w + 8, (uint32_t)(crc & 0x7FFFFFFF));
    put_be32(w + 12, (uint32_t)r->queue_id);
    put_be32(w + 16, (uint32_t)r->flag);
    put_be64(w + QUEUE_OFFSET_POSITION, (uint64_t)r->queue_offset);
    put_be64(w + PHYSICAL_OFFSET_POSITION, (uint64_t)r->physical_offset);
    put_be32(w + 36, (uint32_t)r->sys_flag);
    put_be64(w + 40, (uint64_t)r->born_timestamp);
    w += 48;
    memcpy(w, r->born_ip, (size_t)r->born_ip_len);
    w += r->born_ip_len;
    put_be32(w, (uint32_t)r->born_port);
    put_be64(w + 4, (uint64_t)r->store_timestamp);
    w += 12;
    memcpy(w, r->store_ip, (size_t)r->store_ip_len);
    w += r->store_ip_len;
    put_be32(w, (uint32_t)r->store_port);
    put_be32(w + 4, (uint32_t)r->reconsume_times);
    put_be64(w + 8, (uint64_t)r->prepared_transaction_offset);
    put_be32(w + 16, (uint32_t)body.len);
    w += 20;
    memcpy(w, body.buf, (size_t)body.len);
    w += body.len;
    PyBuffer_Release(&body);
    if (v1) {
        *w++ = (unsigned char)topic_len;
    } else {
        *w++ = (unsigned char)(topic_len >> 8);
        *w++ = (unsigned char)topic_len;
    }
    memcpy(w, topic, (size_t)topic_len);
    w += topic_len;
    *w++ = (unsigned char)(props_len >> 8);
    *w++ = (unsigned char)props_len;
    memcpy(w, props, (size_t)props_len);
    *size = total;
    return 0;
}

/* The fields the records of one put share, from ``args``: queue_id, sys_flag, born_timestamp,
 * born_ip, born_port, store_ip, store_port, reconsume_times (in that order). */
static int shared_fields(PyObject *const *args, record_fields *r)
{
    if (!PyBytes_Check(args[3]) || !PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "encode_record: the host addresses are bytes");
        return -1;
    }
    r->in_range = 1;
    r->host_bits = PyLong_AsUnsignedLongLongMask(args[1]);
    if (r->host_bits == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    r->born_ip = PyBytes_AS_STRING(args[3]);
    r->born_ip_len = PyBytes_GET_SIZE(args[3]);
    r->store_ip = PyBytes_AS_STRING(args[5]);
    r->store_ip_len = PyBytes_GET_SIZE(args[5]);
    if (packed_field(args[0], 32, &r->queue_id, &r->in_range) < 0 || packed_field(args[1], 32, &r->sys_flag, &r->in_range) < 0
        || packed_field(args[2], 64, &r->born_timestamp, &r->in_range) < 0
        || packed_field(args[4], 32, &r->born_port, &r->in_range) < 0
        || packed_field(args[6], 32, &r->store_port, &r->in_range) < 0
        || packed_field(args[7], 32, &r->reconsume_times, &r->in_range) < 0)
        return -1;
    return 0;
}

/* pos and limit: values outside long long are outside any buffer */
static int position_args(PyObject *const *args, long long *pos, long long *limit)
{
    int overflow = 0;
    *pos = PyLong_AsLongLongAndOverflow(args[0], &overflow);
    if (*pos == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        *pos = -1;
    overflow = 0;
    *limit = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (*limit == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        *limit = -1;
    return 0;
}

PyDoc_STRVAR(encode_record_doc,
"encode_record(buf, pos, limit, topic, properties, body, queue_id, flag, sys_flag, born_timestamp,\n"
"              born_ip, born_port, store_ip, store_port, reconsume_times,\n"
"              prepared_transaction_offset, queue_offset, physical_offset, store_timestamp) -> int\n\n"
"Write one CommitLog record at ``buf[pos:]``, CRC and lengths included, when it fits below\n"
"``limit``: returns its size. When it does not fit, writes nothing and returns minus its size\n"
"(``limit == pos``: a query of the size). ``sys_flag``'s host bits must match the lengths of\n"
"``born_ip`` and ``store_ip`` (4 or 16). Raises BufferError for a ``buf`` not writable,\n"
"ValueError for a topic or properties too long for a record (UnicodeEncodeError when not\n"
"encodable), hosts that do not match ``sys_flag``, or ``pos`` / ``limit`` outside ``buf``;\n"
"struct.error for a field outside its type. Nothing is written when it raises.");

static PyObject *encode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 19) {
        PyErr_SetString(PyExc_TypeError, "encode_record(buf, pos, limit, topic, properties, body, queue_id, flag, "
                                         "sys_flag, born_timestamp, born_ip, born_port, store_ip, store_port, "
                                         "reconsume_times, prepared_transaction_offset, queue_offset, "
                                         "physical_offset, store_timestamp)");
        return NULL;
    }
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    long long pos, limit, size;
    record_fields r;
    /* the shared fields' order: queue_id (6), sys_flag (8), born_timestamp, born_ip, born_port,
     * store_ip, store_port, reconsume_times (9..14) */
    PyObject *shared[8] = {args[6], args[8], args[9], args[10], args[11], args[12], args[13], args[14]};
    if (position_args(args + 1, &pos, &limit) < 0 || shared_fields(shared, &r) < 0
        || packed_field(args[7], 32, &r.flag, &r.in_range) < 0
        || packed_field(args[15], 64, &r.prepared_transaction_offset, &r.in_range) < 0
        || packed_field(args[16], 64, &r.queue_offset, &r.in_range) < 0
        || packed_field(args[17], 64, &r.physical_offset, &r.in_range) < 0
        || packed_field(args[18], 64, &r.store_timestamp, &r.in_range) < 0)
        goto done;
    if (record_write(&out, pos, limit, args[3], args[4], args[5], &r, &size) == 0)
        result = PyLong_FromLongLong(size);
done:
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(encode_records_doc,
"encode_records(buf, pos, room, max_size, topic, entries, queue_id, sys_flag, born_timestamp,\n"
"               born_ip, born_port, store_ip, store_port, reconsume_times, first_queue_offset,\n"
"               base_offset, store_timestamp) -> list[int] | None\n\n"
"The records of a batch, one after the other from ``buf[pos:]``, as encode_record writes them:\n"
"entry ``i`` of ``entries`` ((flag, body, properties) tuples) with queue offset\n"
"``first_queue_offset + i``, physical offset ``base_offset`` plus its position, each ending\n"
"below ``room`` and at most ``max_size`` bytes long. Returns their sizes, or None when one did\n"
"not fit (those before it are written). Raises what encode_record raises.");

static PyObject *encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 17 || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "encode_records(buf, pos, room, max_size, topic, entries: list, queue_id, "
                                         "sys_flag, born_timestamp, born_ip, born_port, store_ip, store_port, "
                                         "reconsume_times, first_queue_offset, base_offset, store_timestamp)");
        return NULL;
    }
    PyObject *entries = args[5];
    long long pos, room, max_size, nums[3];
    record_fields r;
    if (position_args(args + 1, &pos, &room) < 0 || int_args(args + 3, 1, &max_size) < 0
        || shared_fields(args + 6, &r) < 0 || int_args(args + 14, 3, nums) < 0)
        return NULL;
    long long first_queue_offset = nums[0], base_offset = nums[1];
    r.prepared_transaction_offset = 0;
    r.store_timestamp = nums[2];
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *sizes = PyList_New(0);
    if (sizes == NULL)
        goto fail;
    int in_range = r.in_range;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3) {
            PyErr_SetString(PyExc_TypeError, "encode_records: an entry is a (flag, body, properties) tuple");
            goto fail;
        }
        r.in_range = in_range;
        if (packed_field(PyTuple_GET_ITEM(entry, 0), 32, &r.flag, &r.in_range) < 0)
            goto fail;
        r.queue_offset = packed_sum(first_queue_offset, i, &r.in_range);
        r.physical_offset = packed_sum(base_offset, pos, &r.in_range);
        long long limit = max_size > room - pos ? room : pos + max_size, size;
        if (limit < pos)
            limit = pos;
        if (record_write(&out, pos, limit, args[4], PyTuple_GET_ITEM(entry, 2), PyTuple_GET_ITEM(entry, 1), &r,
                         &size) < 0)
            goto fail;
        if (size < 0) {
            Py_DECREF(sizes);
            PyBuffer_Release(&out);
            Py_RETURN_NONE;
        }
        PyObject *n = PyLong_FromLongLong(size);
        if (n == NULL || PyList_Append(sizes, n) < 0) {
            Py_XDECREF(n);
            goto fail;
        }
        Py_DECREF(n);
        pos += size;
    }
    PyBuffer_Release(&out);
    return sizes;
fail:
    Py_XDECREF(sizes);
    PyBuffer_Release(&out);
    return NULL;
}

/* ---- the dispatch requests of a batch's records ---- */

/* The members of a RecordInfo, in the order of its fields (what batch_record_infos sets). */
#define INFO_MEMBERS 10
static const char *const info_member_names[INFO_MEMBERS] = {
    "size", "topic", "queue_id", "queue_offset", "commit_log_offset", "sys_flag", "store_timestamp", "tags_code",
    "prepared_transaction_offset", "properties_string"};
static PyTypeObject *info_type;   /* the class info_offsets are of (a strong reference) */
static Py_ssize_t info_offsets[INFO_MEMBERS];

/* The offsets of ``cls``'s slots named as the fields above, found once per class: 0, or -1 with
 * TypeError when it is not a class with a writable slot of each name. */
static int info_layout(PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "batch_record_infos: record_type is a class");
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    if (t == info_type)
        return 0;
    Py_ssize_t offsets[INFO_MEMBERS];
    for (int k = 0; k < INFO_MEMBERS; k++) {
        offsets[k] = -1;
        for (PyTypeObject *b = t; b != NULL && offsets[k] < 0; b = b->tp_base) {
            for (PyMemberDef *m = b->tp_members; m != NULL && m->name != NULL; m++) {
                if (strcmp(m->name, info_member_names[k]) == 0) {
                    if (m->type == T_OBJECT_EX && !(m->flags & READONLY))
                        offsets[k] = m->offset;
                    break;
                }
            }
        }
        if (offsets[k] < 0) {
            PyErr_Format(PyExc_TypeError, "batch_record_infos: %s has no writable slot %s", t->tp_name,
                         info_member_names[k]);
            return -1;
        }
    }
    Py_INCREF(t);
    Py_XSETREF(info_type, t);
    memcpy(info_offsets, offsets, sizeof offsets);
    return 0;
}

PyDoc_STRVAR(batch_record_infos_doc,
"batch_record_infos(record_type, entries, sizes, tags_name, topic, queue_id, first_queue_offset,\n"
"                   begin, sys_flag, store_timestamp, msg_id_prefix) -> (list, str)\n\n"
"The dispatch requests of a batch's records as encode_records wrote them from ``begin``: for\n"
"entry ``i`` ((flag, body, properties)) of size ``sizes[i]``, a ``record_type`` (a class with\n"
"RecordInfo's slots) with queue offset ``first_queue_offset + i``, its commit log offset, the\n"
"tags code of the ``tags_name`` property; and the records' offset msgIds joined by commas, each\n"
"``msg_id_prefix`` (ASCII) and the offset in 16 upper-case hex digits. Raises ValueError for a\n"
"negative ``begin``, not one size per entry, or a prefix that is not ASCII; TypeError for a\n"
"record_type without those slots.");

static PyObject *batch_record_infos(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11 || !PyList_Check(args[1]) || !PyList_Check(args[2]) || !PyUnicode_Check(args[3])
        || !PyUnicode_Check(args[10])) {
        PyErr_SetString(PyExc_TypeError, "batch_record_infos(record_type, entries: list, sizes: list, tags_name: str, "
                                         "topic, queue_id, first_queue_offset, begin, sys_flag, store_timestamp, "
                                         "msg_id_prefix: str)");
        return NULL;
    }
    PyObject *entries = args[1], *sizes = args[2], *tags_name = args[3], *prefix = args[10];
    Py_ssize_t n = PyList_GET_SIZE(entries), prefix_len = PyUnicode_GET_LENGTH(prefix);
    long long nums[2];
    if (info_layout(args[0]) < 0 || int_args(args + 6, 2, nums) < 0)
        return NULL;
    long long queue_offset = nums[0], offset = nums[1];
    if (PyList_GET_SIZE(sizes) != n || offset < 0 || !PyUnicode_IS_ASCII(prefix)
        || PyUnicode_GET_LENGTH(tags_name) == 0) {
        PyErr_SetString(PyExc_ValueError, "batch_record_infos: one size per entry, a begin >= 0, an ASCII msgId "
                                          "prefix and a tags name");
        return NULL;
    }
    if (n > 0 && queue_offset > LLONG_MAX - (n - 1)) {   /* the last one's queue offset */
        PyErr_SetString(PyExc_OverflowError, "batch_record_infos: the queue offsets run past 64 bits");
        return NULL;
    }
    PyTypeObject *t = info_type;
    PyObject *infos = PyList_New(n), *zero = PyLong_FromLong(0);
    PyObject *ids = n ? PyUnicode_New(n * (prefix_len + 17) - 1, 127) : PyUnicode_New(0, 127);
    if (infos == NULL || zero == NULL || ids == NULL)
        goto fail;
    Py_UCS1 *w = PyUnicode_1BYTE_DATA(ids);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i), *size_obj = PyList_GET_ITEM(sizes, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 2))) {
            PyErr_SetString(PyExc_TypeError, "batch_record_infos: an entry is a (flag, body, properties: str) tuple");
            goto fail;
        }
        PyObject *props = PyTuple_GET_ITEM(entry, 2);
        long long size = PyLong_AsLongLong(size_obj);
        if (size == -1 && PyErr_Occurred())
            goto fail;
        if (size < 0) {
            PyErr_SetString(PyExc_ValueError, "batch_record_infos: a negative size");
            goto fail;
        }
        if (offset > LLONG_MAX - size) {
            PyErr_SetString(PyExc_OverflowError, "batch_record_infos: the records end past a 64-bit offset");
            goto fail;
        }
        Py_ssize_t start, stop;
        int found = property_range(props, tags_name, &start, &stop);
        if (found < 0)
            goto fail;
        PyObject *values[INFO_MEMBERS] = {
            Py_NewRef(size_obj), Py_NewRef(args[4]), Py_NewRef(args[5]), PyLong_FromLongLong(queue_offset + i),
            PyLong_FromLongLong(offset), Py_NewRef(args[8]), Py_NewRef(args[9]),
            PyLong_FromLong(found ? (long)(int32_t)java_hash_range(0, props, start, stop) : 0), Py_NewRef(zero),
            Py_NewRef(props)};
        PyObject *info = t->tp_alloc(t, 0);
        int failed = info == NULL;
        for (int k = 0; k < INFO_MEMBERS; k++) {
            if (values[k] == NULL)
                failed = 1;
            if (failed)
                Py_XDECREF(values[k]);
            else
                *(PyObject **)((char *)info + info_offsets[k]) = values[k];
        }
        if (failed) {
            Py_XDECREF(info);
            goto fail;
        }
        PyList_SET_ITEM(infos, i, info);
        if (i > 0)
            *w++ = ',';
        memcpy(w, PyUnicode_1BYTE_DATA(prefix), (size_t)prefix_len);
        w += prefix_len;
        for (int d = 15; d >= 0; d--)
            *w++ = (Py_UCS1)"0123456789ABCDEF"[((unsigned long long)offset >> (4 * d)) & 0xF];
        offset += size;
    }
    Py_DECREF(zero);
    return Py_BuildValue("(NN)", infos, ids);
fail:
    Py_XDECREF(infos);
    Py_XDECREF(zero);
    Py_XDECREF(ids);
    return NULL;
}

#define CQ_UNIT_SIZE 20   /* commit log offset (int64), size (int32), tags code (int64) */

PyDoc_STRVAR(consume_queue_units_doc,
"consume_queue_units(record_type, records: Sequence) -> bytes | None\n\n"
"The consume queue units (commit log offset, size, tags code) of ``records`` one after the\n"
"other, when they are consecutive records of one queue: each a ``record_type`` (a class with\n"
"RecordInfo's slots), of the first one's topic, queue_id and sys_flag, at its queue offset plus\n"
"its position. None otherwise (or when there are none). Raises struct.error for a field outside\n"
"the unit's types.");

static PyObject *consume_queue_units(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "consume_queue_units(record_type, records)");
        return NULL;
    }
    if (info_layout(args[0]) < 0)
        return NULL;
    PyObject *records = PySequence_Fast(args[1], "consume_queue_units: records is a sequence");
    if (records == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(records);
    PyObject **items = PySequence_Fast_ITEMS(records);
    PyTypeObject *t = info_type;
    PyObject *out = NULL;
#define INFO_MEMBER(r, k) (*(PyObject **)((char *)(r) + info_offsets[k]))
    if (n == 0 || Py_TYPE(items[0]) != t)
        goto not_one_queue;
    PyObject *first = items[0], *first_qo = INFO_MEMBER(first, 3);
    if (first_qo == NULL || !PyLong_CheckExact(first_qo))
        goto not_one_queue;
    int overflow = 0;
    long long first_queue_offset = PyLong_AsLongLongAndOverflow(first_qo, &overflow);
    if (overflow || first_queue_offset > LLONG_MAX - (n - 1))   /* the last one's queue offset */
        goto not_one_queue;
    if ((out = PyBytes_FromStringAndSize(NULL, n * CQ_UNIT_SIZE)) == NULL)
        goto fail;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    /* size (0), topic (1), queue_id (2), queue_offset (3), commit_log_offset (4), sys_flag (5), tags_code (7) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = items[i];
        if (Py_TYPE(r) != t)
            goto not_one_queue;
        for (int k = 0; k < INFO_MEMBERS; k++) {
            if (INFO_MEMBER(r, k) == NULL)   /* a slot never set: not a record this builds units of */
                goto not_one_queue;
        }
        if (i > 0) {
            static const int same[3] = {1, 2, 5};
            for (int j = 0; j < 3; j++) {
                int eq = PyObject_RichCompareBool(INFO_MEMBER(r, same[j]), INFO_MEMBER(first, same[j]), Py_EQ);
                if (eq < 0)
                    goto fail;
                if (!eq)
                    goto not_one_queue;
            }
        }
        PyObject *qo = INFO_MEMBER(r, 3);
        if (!PyLong_CheckExact(qo))
            goto not_one_queue;
        long long queue_offset = PyLong_AsLongLongAndOverflow(qo, &overflow);
        if (overflow || queue_offset != first_queue_offset + i)
            goto not_one_queue;
        long long offset, size, tags_code;
        /* what is not an int is outside the unit's types, as struct.pack finds it */
        int in_range = PyLong_Check(INFO_MEMBER(r, 4)) && PyLong_Check(INFO_MEMBER(r, 0))
                       && PyLong_Check(INFO_MEMBER(r, 7));
        if (in_range && (packed_field(INFO_MEMBER(r, 4), 64, &offset, &in_range) < 0
            || packed_field(INFO_MEMBER(r, 0), 32, &size, &in_range) < 0
            || packed_field(INFO_MEMBER(r, 7), 64, &tags_code, &in_range) < 0))
            goto fail;
        if (!in_range) {
            PyErr_SetString(struct_error, "a consume queue unit field is outside its type");
            goto fail;
        }
        put_be64(w, (uint64_t)offset);
        put_be32(w + 8, (uint32_t)size);
        put_be64(w + 12, (uint64_t)tags_code);
        w += CQ_UNIT_SIZE;
    }
#undef INFO_MEMBER
    Py_DECREF(records);
    return out;
not_one_queue:
    Py_XDECREF(out);
    Py_DECREF(records);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(out);
    Py_DECREF(records);
    return NULL;
}

PyDoc_STRVAR(parse_java_int_doc,
"parse_java_int(text, bits=64) -> int\n\n"
"The value of ``text`` as Java's parseInt (``bits=32``) or parseLong reads it: an optional sign\n"
"and 1 to 19 ASCII digits, in the type's range. Raises ValueError for anything else.");

/* ``text`` read as Java's parseInt (bits 32) or parseLong: 1 with *out set, 0 when it is not a
 * number (an optional sign and 1 to 19 ASCII digits), -1 when it is out of the type's range. */
static int java_int_value(PyObject *text, int bits, long long *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (!PyUnicode_IS_ASCII(text) || n == 0)
        return 0;
    const char *c = (const char *)PyUnicode_DATA(text);
    unsigned long long magnitude = 0;
    int negative = 0;
    Py_ssize_t i = 0;
    if (c[0] == '+' || c[0] == '-') {
        negative = c[0] == '-';
        i = 1;
    }
    if (n - i < 1 || n - i > 19)
        return 0;
    for (; i < n; i++) {
        if (c[i] < '0' || c[i] > '9')
            return 0;
        magnitude = magnitude * 10 + (unsigned long long)(c[i] - '0');   /* 19 digits: < 2**64 */
    }
    if (magnitude > (bits == 32 ? (unsigned long long)INT32_MAX : (unsigned long long)INT64_MAX) + negative)
        return -1;
    *out = negative ? (magnitude == (1ULL << 63) ? INT64_MIN : -(long long)magnitude) : (long long)magnitude;
    return 1;
}

static PyObject *parse_java_int(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *bits_obj = nargs == 2 ? args[1] : NULL;
    if (nkw == 1 && nargs == 1 && PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))
        && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "bits") == 0)
        bits_obj = args[1];
    else if (nkw != 0 || nargs < 1 || nargs > 2)
        bits_obj = Py_None;   /* a call this function does not take */
    if (bits_obj == Py_None || !PyUnicode_Check(args[0]) || (bits_obj != NULL && !PyLong_Check(bits_obj))) {
        PyErr_SetString(PyExc_TypeError, "parse_java_int(text: str, bits: int = 64)");
        return NULL;
    }
    int bits = 64;
    if (bits_obj != NULL) {
        int overflow = 0;
        long b = PyLong_AsLongAndOverflow(bits_obj, &overflow);
        if (b == -1 && PyErr_Occurred())
            return NULL;
        if (!overflow && b == 32)
            bits = 32;
    }
    PyObject *text = args[0];
    long long value;
    int found = java_int_value(text, bits, &value);
    if (found == 1)
        return PyLong_FromLongLong(value);
    PyObject *shown = PyUnicode_Substring(text, 0, 32);
    if (shown == NULL)
        return NULL;
    if (found == 0)
        PyErr_Format(PyExc_ValueError, "not a number: %R", shown);
    else if (bits_obj != NULL)   /* the width as the caller wrote it, as the twin shows it */
        PyErr_Format(PyExc_ValueError, "%R is out of the range of a %S-bit integer", shown, bits_obj);
    else
        PyErr_Format(PyExc_ValueError, "%R is out of the range of a 64-bit integer", shown);
    Py_DECREF(shown);
    return NULL;
}

#define HASHMAP_INITIAL_BUCKETS 16   /* java.util.HashMap: 16 buckets, doubled past 3/4 in use */

typedef struct {
    uint32_t bucket;
    Py_ssize_t order;   /* insertion order: the tie-break that makes the sort stable */
    PyObject *name, *value;
} property_slot;

static int by_bucket(const void *a, const void *b)
{
    const property_slot *x = a, *y = b;
    if (x->bucket != y->bucket)
        return x->bucket < y->bucket ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order);
}

PyDoc_STRVAR(properties_to_string_doc,
"properties_to_string(props, entries_held=0) -> str\n\n"
"Java's messageProperties2String: ``name \\x01 value`` pairs joined by ``\\x02``, in the iteration\n"
"order of the Java HashMap they were put into (``props``' insertion order; ``entries_held``: the\n"
"most entries that map held, which sized its buckets). None values are skipped.");

static PyObject *properties_to_string(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "properties_to_string(props: dict, entries_held: int = 0)");
        return NULL;
    }
    PyObject *props = args[0];
    Py_ssize_t held = 0;
    if (nargs == 2) {
        held = PyLong_AsSsize_t(args[1]);
        if (held == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t size = PyDict_GET_SIZE(props);
    if (held < size)
        held = size;
    uint64_t buckets = HASHMAP_INITIAL_BUCKETS;
    while ((uint64_t)held > buckets * 3 / 4)
        buckets *= 2;
    uint32_t mask = (uint32_t)(buckets - 1);
    property_slot *slots = PyMem_Malloc(sizeof(property_slot) * (size_t)(size ? size : 1));
    if (slots == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL, *pieces = NULL;
    Py_ssize_t n = 0, i = 0;
    PyObject *name, *value;
    while (PyDict_Next(props, &i, &name, &value)) {
        if (value == Py_None)
            continue;
        if (!PyUnicode_Check(name) || !PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "property names and values are str");
            goto done;
        }
        uint32_t h = java_hash_range(0, name, 0, PyUnicode_GET_LENGTH(name));
        slots[n].bucket = (h ^ (h >> 16)) & mask;
        slots[n].order = n;
        slots[n].name = name;
        slots[n].value = value;
        n++;
    }
    qsort(slots, (size_t)n, sizeof(property_slot), by_bucket);
    pieces = PyList_New(n ? 4 * n - 1 : 0);
    if (pieces == NULL)
        goto done;
    PyObject *name_value = PyUnicode_FromOrdinal(0x01), *pair = PyUnicode_FromOrdinal(PROPERTY_SEPARATOR_CHAR);
    if (name_value == NULL || pair == NULL) {
        Py_XDECREF(name_value);
        Py_XDECREF(pair);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k) {
            Py_INCREF(pair);
            PyList_SET_ITEM(pieces, 4 * k - 1, pair);
        }
        Py_INCREF(slots[k].name);
        PyList_SET_ITEM(pieces, 4 * k, slots[k].name);
        Py_INCREF(name_value);
        PyList_SET_ITEM(pieces, 4 * k + 1, name_value);
        Py_INCREF(slots[k].value);
        PyList_SET_ITEM(pieces, 4 * k + 2, slots[k].value);
    }
    Py_DECREF(name_value);
    Py_DECREF(pair);
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty != NULL) {
        result = PyUnicode_Join(empty, pieces);
        Py_DECREF(empty);
    }
done:
    Py_XDECREF(pieces);
    PyMem_Free(slots);
    return result;
}

/* ---- a plain send's header ---- */

PyDoc_STRVAR(plain_send_fields_doc,
"plain_send_fields(header, names, property_names, cluster) -> tuple | None\n\n"
"A send header's fields in one call, for a plain message: (topic, queueId, sysFlag, bornTimestamp,\n"
"flag, properties string as stored, wait store, reconsumeTimes, tags code). ``names``: the header's\n"
"names of SEND_HEADER_FIELDS; ``property_names``: CLUSTER, WAIT, TAGS, then the names that make a\n"
"message not plain. None when the message is not plain or a field is missing or not a number: the\n"
"caller's general path then takes it. The twin is send_header.plain_send_fields_py.");

#define SEND_HEADER_FIELD_COUNT 9
#define PLAIN_PROPERTY_NAMES_MIN 3

/* The str value of ``name`` in ``header``: 1 with *value borrowed (NULL when absent or None), 0
 * when it is there and not a str, -1 with an exception set. */
static int header_str(PyObject *header, PyObject *name, PyObject **value)
{
    *value = PyDict_GetItemWithError(header, name);
    if (*value == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (*value == Py_None) {
        *value = NULL;
        return 1;
    }
    return PyUnicode_Check(*value) ? 1 : 0;
}

static PyObject *plain_send_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1])
        || PyTuple_GET_SIZE(args[1]) != SEND_HEADER_FIELD_COUNT || !PyTuple_Check(args[2])
        || PyTuple_GET_SIZE(args[2]) < PLAIN_PROPERTY_NAMES_MIN || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "plain_send_fields(header: dict, names: tuple (9), "
                        "property_names: tuple (3 or more), cluster: str)");
        return NULL;
    }
    PyObject *header = args[0], *names = args[1], *property_names = args[2];
    /* producerGroup, topic, queueId, sysFlag, bornTimestamp, flag, properties, reconsumeTimes, batch */
    PyObject *v[SEND_HEADER_FIELD_COUNT];
    for (int k = 0; k < SEND_HEADER_FIELD_COUNT; k++) {
        int rc = header_str(header, PyTuple_GET_ITEM(names, k), &v[k]);
        if (rc < 0)
            return NULL;
        if (rc == 0)
            Py_RETURN_NONE;
    }
    for (int k = 0; k < 6; k++) {   /* the required ones, present and not empty */
        if (v[k] == NULL || PyUnicode_GET_LENGTH(v[k]) == 0)
            Py_RETURN_NONE;
    }
    long long queue_id, sys_flag, born_timestamp, flag, reconsume_times = 0;
    if (java_int_value(v[2], 32, &queue_id) != 1 || java_int_value(v[3], 32, &sys_flag) != 1
        || java_int_value(v[4], 64, &born_timestamp) != 1 || java_int_value(v[5], 32, &flag) != 1)
        Py_RETURN_NONE;
    if (v[7] != NULL && PyUnicode_GET_LENGTH(v[7]) > 0 && java_int_value(v[7], 32, &reconsume_times) != 1)
        reconsume_times = 0;   /* as the general path: a bad count is no count */
    PyObject *batch = v[8];
    if (batch != NULL) {   /* "true" in any case is a batch; a non-ASCII value is left to the general path */
        if (!PyUnicode_IS_ASCII(batch))
            Py_RETURN_NONE;
        if (PyUnicode_GET_LENGTH(batch) == 4) {
            const char *c = (const char *)PyUnicode_DATA(batch);
            if ((c[0] | 0x20) == 't' && (c[1] | 0x20) == 'r' && (c[2] | 0x20) == 'u' && (c[3] | 0x20) == 'e')
                Py_RETURN_NONE;
        }
    }
    PyObject *props = string_to_properties(module, v[6] == NULL ? Py_None : v[6]);
    if (props == NULL)
        return NULL;
    PyObject *result = NULL, *properties_string = NULL, *held = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(property_names);
    for (Py_ssize_t k = PLAIN_PROPERTY_NAMES_MIN; k < count; k++) {
        int there = PyDict_Contains(props, PyTuple_GET_ITEM(property_names, k));
        if (there < 0)
            goto done;
        if (there) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    PyObject *cluster_name = PyTuple_GET_ITEM(property_names, 0), *wait_name = PyTuple_GET_ITEM(property_names, 1);
    if (PyDict_SetItem(props, cluster_name, args[3]) < 0)
        goto done;
    Py_ssize_t entries_held = PyDict_GET_SIZE(props);   /* WAIT still in: the map Java sized */
    PyObject *wait = PyDict_GetItemWithError(props, wait_name);
    if (wait == NULL && PyErr_Occurred())
        goto done;
    /* not stored, as in the Java broker; "false" answers at once */
    int wait_store = wait == NULL || !PyUnicode_Check(wait) || PyUnicode_CompareWithASCIIString(wait, "false") != 0;
    if (wait != NULL && PyDict_DelItem(props, wait_name) < 0)
        goto done;
    if ((held = PyLong_FromSsize_t(entries_held)) == NULL)
        goto done;
    PyObject *to_string_args[2] = {props, held};
    if ((properties_string = properties_to_string(module, to_string_args, 2)) == NULL)
        goto done;
    PyObject *tags = PyDict_GetItemWithError(props, PyTuple_GET_ITEM(property_names, 2));
    if (tags == NULL && PyErr_Occurred())
        goto done;
    long long tags_code = 0;
    if (tags != NULL && PyUnicode_Check(tags) && PyUnicode_GET_LENGTH(tags) > 0)
        tags_code = (int32_t)java_hash_range(0, tags, 0, PyUnicode_GET_LENGTH(tags));
    result = Py_BuildValue("(OLLLLONLL)", v[1], queue_id, sys_flag, born_timestamp, flag, properties_string,
                           PyBool_FromLong(wait_store), reconsume_times, tags_code);
done:
    Py_XDECREF(properties_string);
    Py_XDECREF(held);
    Py_DECREF(props);
    return result;
}

/* ---- the NameServer's topic queue table ---- */

/* the row members a route needs, by the names RegisteredTopic gives them (set in native_exec) */
static PyObject *row_member_names[4];
static PyObject *row_topic_name;

PyDoc_STRVAR(merge_queue_datas_doc,
"merge_queue_datas(table, broker_name, rows, interned, make) -> list[str]\n\n"
"Point each registered row's topic at its queue data for ``broker_name`` in ``table`` (topic ->\n"
"{broker name -> queue data}, the inner dicts shared between topics and never changed in place):\n"
"``interned[key]`` with ``key = (broker_name, row.read_queue_nums, row.write_queue_nums, row.perm,\n"
"row.topic_sys_flag)``, or ``make(*key)`` when the key is not there. A topic whose entry is\n"
"already equal keeps its dict; the others get the copy with the entry set, one copy per distinct\n"
"(dict, queue data) in the call. Returns the topics whose entry changed, in row order.");

/* The queue data of a row: the previous row's when the members are equal (a broker's topics
 * mostly share them), else the interned one or a new one. 0, or -1 with an exception. */
static int row_queue_data(PyObject *row, PyObject *broker, PyObject *interned, PyObject *make,
                          PyObject **last, PyObject **queue_data)
{
    PyObject *members[4] = {NULL, NULL, NULL, NULL};
    int same = *queue_data != NULL;
    for (int k = 0; k < 4; k++) {
        members[k] = PyObject_GetAttr(row, row_member_names[k]);
        if (members[k] == NULL)
            goto fail;
        /* equal as dict keys are: the lookup would find the same entry */
        if (same && (same = PyObject_RichCompareBool(members[k], last[k], Py_EQ)) < 0)
            goto fail;
    }
    if (!same) {
        PyObject *key = PyTuple_Pack(5, broker, members[0], members[1], members[2], members[3]);
        if (key == NULL)
            goto fail;
        PyObject *found = PyDict_GetItemWithError(interned, key);
        if (found != NULL)
            Py_INCREF(found);
        else if (!PyErr_Occurred())
            found = PyObject_Call(make, key, NULL);
        Py_DECREF(key);
        if (found == NULL)
            goto fail;
        Py_XSETREF(*queue_data, found);
        for (int k = 0; k < 4; k++) {
            Py_XSETREF(last[k], members[k]);
            members[k] = NULL;
        }
    }
    for (int k = 0; k < 4; k++)
        Py_XDECREF(members[k]);
    return 0;
fail:
    for (int k = 0; k < 4; k++)
        Py_XDECREF(members[k]);
    return -1;
}

/* 1 when ``old`` (a topic's dict, or NULL) must get ``queue_data`` for ``broker``, recording the
 * topic in ``changed`` when it replaces a different entry; 0 when the entry is already equal;
 * -1 with an exception. */
static int needs_entry(PyObject *old, PyObject *broker, PyObject *queue_data, PyObject *topic, PyObject *changed)
{
    if (old == NULL)
        return 1;
    if (!PyDict_Check(old)) {
        PyErr_SetString(PyExc_TypeError, "merge_queue_datas: a table entry is not a dict");
        return -1;
    }
    PyObject *current = PyDict_GetItemWithError(old, broker);
    if (current == NULL)
        return PyErr_Occurred() ? -1 : 1;
    if (current == queue_data)
        return 0;
    Py_INCREF(current);   /* the comparison may run Python code */
    int differs = PyObject_RichCompareBool(current, queue_data, Py_NE);
    Py_DECREF(current);
    if (differs <= 0)
        return differs;
    return PyList_Append(changed, topic) < 0 ? -1 : 1;
}

/* The dict that replaces ``old`` (or NULL: a new topic) once ``queue_data`` is set for
 * ``broker``: made once per distinct pair and kept in ``memo``, which holds both of the pair so
 * their addresses stay theirs for the call. Borrowed (``memo`` owns it), or NULL with an exception. */
static PyObject *replacement(PyObject *memo, PyObject *old, PyObject *broker, PyObject *queue_data)
{
    PyObject *old_id = PyLong_FromVoidPtr(old), *queue_data_id = PyLong_FromVoidPtr(queue_data);
    PyObject *step = old_id != NULL && queue_data_id != NULL ? PyTuple_Pack(2, old_id, queue_data_id) : NULL;
    Py_XDECREF(old_id);
    Py_XDECREF(queue_data_id);
    if (step == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(memo, step), *new = NULL;
    if (entry != NULL) {
        new = PyTuple_GET_ITEM(entry, 2);
    } else if (!PyErr_Occurred()) {
        PyObject *made = old != NULL ? PyDict_Copy(old) : PyDict_New();
        if (made != NULL && PyDict_SetItem(made, broker, queue_data) == 0
            && (entry = PyTuple_Pack(3, old != NULL ? old : Py_None, queue_data, made)) != NULL) {
            if (PyDict_SetItem(memo, step, entry) == 0)
                new = made;
            Py_DECREF(entry);
        }
        Py_XDECREF(made);
    }
    Py_DECREF(step);
    return new;
}

static PyObject *merge_queue_datas(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyDict_Check(args[0]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "merge_queue_datas(table: dict, broker_name, rows, interned: dict, make)");
        return NULL;
    }
    PyObject *table = args[0], *broker = args[1], *interned = args[3], *make = args[4];
    PyObject *rows = PySequence_Fast(args[2], "merge_queue_datas: rows must be a sequence");
    if (rows == NULL)
        return NULL;
    PyObject *changed = PyList_New(0), *memo = PyDict_New();
    PyObject *last[4] = {NULL, NULL, NULL, NULL}, *queue_data = NULL, *topic = NULL, *old = NULL;
    /* the previous row's step (borrowed: memo holds all three); most rows repeat it */
    PyObject *step_old = NULL, *step_queue_data = NULL, *step_new = NULL;
    if (changed == NULL || memo == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(rows); i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, i);
        if (row_queue_data(row, broker, interned, make, last, &queue_data) < 0
            || (topic = PyObject_GetAttr(row, row_topic_name)) == NULL)
            goto fail;
        old = PyDict_GetItemWithError(table, topic);
        if (old == NULL && PyErr_Occurred())
            goto fail;
        Py_XINCREF(old);   /* held while its entry is compared */
        int needed = needs_entry(old, broker, queue_data, topic, changed);
        if (needed < 0)
            goto fail;
        if (needed) {
            if (step_new == NULL || old != step_old || queue_data != step_queue_data) {
                PyObject *new = replacement(memo, old, broker, queue_data);
                if (new == NULL)
                    goto fail;
                step_old = old;
                step_queue_data = queue_data;
                step_new = new;
            }
            if (PyDict_SetItem(table, topic, step_new) < 0)
                goto fail;
        }
        Py_CLEAR(old);
        Py_CLEAR(topic);
    }
    goto done;
fail:
    Py_CLEAR(changed);
done:
    for (int k = 0; k < 4; k++)
        Py_XDECREF(last[k]);
    Py_XDECREF(queue_data);
    Py_XDECREF(topic);
    Py_XDECREF(old);
    Py_XDECREF(memo);
    Py_DECREF(rows);
    return changed;
}

static PyMethodDef native_methods[] = {
    {"topic_key_hash", (PyCFunction)(void (*)(void))topic_key_hash, METH_FASTCALL, topic_key_hash_doc},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL, index_put_doc},
    {"index_build_records", (PyCFunction)(void (*)(void))index_build_records, METH_FASTCALL,
     index_build_records_doc},
    {"decode_ext_fields", (PyCFunction)(void (*)(void))decode_ext_fields, METH_FASTCALL, decode_ext_fields_doc},
    {"encode_ext_fields", (PyCFunction)(void (*)(void))encode_ext_fields, METH_FASTCALL, encode_ext_fields_doc},
    {"decode_rocketmq_header", (PyCFunction)(void (*)(void))decode_rocketmq_header, METH_FASTCALL,
     decode_rocketmq_header_doc},
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL, decode_frames_doc},
    {"encode_rocketmq_frame_head", (PyCFunction)(void (*)(void))encode_rocketmq_frame_head, METH_FASTCALL,
     encode_rocketmq_frame_head_doc},
    {"split_batch", (PyCFunction)(void (*)(void))split_batch, METH_FASTCALL, split_batch_doc},
    {"string_to_properties", string_to_properties, METH_O, string_to_properties_doc},
    {"property_value", (PyCFunction)(void (*)(void))property_value, METH_FASTCALL, property_value_doc},
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL, encode_record_doc},
    {"encode_records", (PyCFunction)(void (*)(void))encode_records, METH_FASTCALL, encode_records_doc},
    {"batch_record_infos", (PyCFunction)(void (*)(void))batch_record_infos, METH_FASTCALL, batch_record_infos_doc},
    {"consume_queue_units", (PyCFunction)(void (*)(void))consume_queue_units, METH_FASTCALL, consume_queue_units_doc},
    {"parse_java_int", (PyCFunction)(void (*)(void))parse_java_int, METH_FASTCALL | METH_KEYWORDS, parse_java_int_doc},
    {"properties_to_string", (PyCFunction)(void (*)(void))properties_to_string, METH_FASTCALL,
     properties_to_string_doc},
    {"plain_send_fields", (PyCFunction)(void (*)(void))plain_send_fields, METH_FASTCALL, plain_send_fields_doc},
    {"merge_queue_datas", (PyCFunction)(void (*)(void))merge_queue_datas, METH_FASTCALL, merge_queue_datas_doc},
    {NULL, NULL, 0, NULL},
};

static int native_exec(PyObject *m)
{
    static const char *const member_names[4] = {"read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag"};
    for (int k = 0; k < 4; k++) {
        if (row_member_names[k] == NULL && (row_member_names[k] = PyUnicode_InternFromString(member_names[k])) == NULL)
            return -1;
    }
    if (row_topic_name == NULL && (row_topic_name = PyUnicode_InternFromString("topic_name")) == NULL)
        return -1;
    /* topic, commit_log_offset, store_timestamp, sys_flag, properties_string: RecordInfo's
     * members by their place in info_member_names */
    static const int record_members[5] = {1, 4, 6, 5, 9};
    for (int k = 0; k < 5; k++) {
        if (record_attr_names[k] == NULL
            && (record_attr_names[k] = PyUnicode_InternFromString(info_member_names[record_members[k]])) == NULL)
            return -1;
    }
    if (struct_error == NULL) {
        PyObject *struct_module = PyImport_ImportModule("struct");
        if (struct_module == NULL)
            return -1;
        struct_error = PyObject_GetAttrString(struct_module, "error");
        Py_DECREF(struct_module);
        if (struct_error == NULL)
            return -1;
    }
    if (zlib_crc32 == NULL) {
        PyObject *zlib_module = PyImport_ImportModule("zlib_ng.zlib_ng");   /* message_props.crc32 */
        if (zlib_module == NULL)
            return -1;
        zlib_crc32 = PyObject_GetAttrString(zlib_module, "crc32");
        Py_DECREF(zlib_module);
        if (zlib_crc32 == NULL)
            return -1;
    }
    if (PyModule_AddIntConstant(m, "INDEX_HEADER_SIZE", INDEX_HEADER_SIZE) < 0
        || PyModule_AddIntConstant(m, "INDEX_SLOT_SIZE", INDEX_SLOT_SIZE) < 0
        || PyModule_AddIntConstant(m, "INDEX_ITEM_SIZE", INDEX_ITEM_SIZE) < 0
        || PyModule_AddIntConstant(m, "TRANSACTION_MASK", TRANSACTION_MASK) < 0
        || PyModule_AddIntConstant(m, "TRANSACTION_ROLLBACK_TYPE", TRANSACTION_ROLLBACK_TYPE) < 0
        || PyModule_AddIntConstant(m, "KEY_SEPARATOR_CHAR", KEY_SEPARATOR_CHAR) < 0
        || PyModule_AddIntConstant(m, "PROPERTY_SEPARATOR_CHAR", PROPERTY_SEPARATOR_CHAR) < 0
        || PyModule_AddIntConstant(m, "CQ_UNIT_SIZE", CQ_UNIT_SIZE) < 0
        || PyModule_AddIntConstant(m, "BATCH_ENTRY_HEAD_SIZE", BATCH_ENTRY_HEAD_SIZE) < 0
        || PyModule_AddIntConstant(m, "QUEUE_OFFSET_POSITION", QUEUE_OFFSET_POSITION) < 0
        || PyModule_AddIntConstant(m, "PHYSICAL_OFFSET_POSITION", PHYSICAL_OFFSET_POSITION) < 0
        || PyModule_AddIntConstant(m, "RECORD_PREFIX_V4_SIZE", RECORD_PREFIX_V4_SIZE) < 0
        || PyModule_AddIntConstant(m, "MAGIC_CODE_V1", MAGIC_CODE_V1) < 0
        || PyModule_AddIntConstant(m, "MAGIC_CODE_V2", MAGIC_CODE_V2) < 0
        || PyModule_AddIntConstant(m, "MAX_TOPIC_LENGTH_V1", MAX_TOPIC_LENGTH_V1) < 0
        || PyModule_AddIntConstant(m, "MAX_PROPERTIES_LENGTH", MAX_PROPERTIES_LENGTH) < 0
        || PyModule_AddIntConstant(m, "BORNHOST_V6_FLAG", BORNHOST_V6_FLAG) < 0
        || PyModule_AddIntConstant(m, "STOREHOSTADDRESS_V6_FLAG", STOREHOSTADDRESS_V6_FLAG) < 0
        || PyModule_AddIntConstant(m, "HASHMAP_INITIAL_BUCKETS", HASHMAP_INITIAL_BUCKETS) < 0
        || PyModule_AddIntConstant(m, "ROCKETMQ_FIXED_SIZE", ROCKETMQ_FIXED_SIZE) < 0
        || PyModule_AddIntConstant(m, "FRAME_PREFIX_SIZE", FRAME_PREFIX_SIZE) < 0
        || PyModule_AddIntConstant(m, "MAX_HEADER_LENGTH", MAX_HEADER_LENGTH) < 0
        || PyModule_AddIntConstant(m, "ROCKETMQ_SERIALIZE_TYPE", ROCKETMQ_SERIALIZE_TYPE) < 0
        || PyModule_AddIntConstant(m, "SEND_HEADER_FIELD_COUNT", SEND_HEADER_FIELD_COUNT) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyrmq.codec._native",
    .m_doc = "The hot loops of the send path and the NameServer in C; pyrmq.codec.native binds them or the Python twins.",
    .m_size = 0,
    .m_methods = native_methods,
    .m_slots = native_slots,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&native_module);
}
