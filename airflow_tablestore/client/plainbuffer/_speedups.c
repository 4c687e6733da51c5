/*
 * The compiled PlainBuffer decoder: bytes -> Row tuples with every CRC-8 verified, and a CRC-8 of long inputs.
 *
 * A drop-in for the pure-Python decoder of decode.py, written against the CPython C API only. It must give
 * exactly what decode.py gives: the same objects (Row, Column, SequenceInfo, CellOp members, sentinels, in the
 * same order) and, for truncated or corrupted input, the same exception class with the same message. So every
 * check below happens in the order decode.py makes it; decode.py's module docstring and _decode_body are the
 * specification. The model classes, the PlainBufferError class and the two error helpers of format.py
 * (bad_tag, check_header) are handed over once by setup() (see implementation.py), so this file imports nothing.
 *
 * Layout (format.py):
 *   row  = 01 pk_cell* [02 data_cell+] [08] [0B ext_len:u32 (0C 13000000 0D epoch 0E ts 0F idx)] 09 row_crc
 *   cell = 03 04 name_len:u32 name [05 len:u32 type payload] [06 op] [07 ts:i64] 0A cell_crc
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- state handed over by setup() ------------------------------------------------------------------- */

static PyTypeObject *row_type = NULL;
static PyTypeObject *column_type = NULL;
static PyTypeObject *sequence_type = NULL;
static PyObject *error_class = NULL;   /* PlainBufferError */
static PyObject *bad_tag_fn = NULL;    /* format.bad_tag(data, pos, expected) -> PlainBufferError */
static PyObject *check_header_fn = NULL; /* format.check_header(data): raises */
static PyObject *op_put = NULL;
static PyObject *op_by_byte[256];      /* CellOp members by their byte (PUT has none) */
static PyObject *sentinel_by_type[256]; /* INF_MIN, INF_MAX, AUTO_INCREMENT by value type */

#define TAG_ROW_PK 0x01
#define TAG_ROW_DATA 0x02
#define TAG_CELL 0x03
#define TAG_CELL_NAME 0x04
#define TAG_CELL_VALUE 0x05
#define TAG_CELL_TYPE 0x06
#define TAG_CELL_TIMESTAMP 0x07
#define TAG_DELETE_ROW_MARKER 0x08
#define TAG_ROW_CHECKSUM 0x09
#define TAG_CELL_CHECKSUM 0x0A
#define TAG_EXTENSION 0x0B
#define TAG_SEQ_INFO 0x0C
#define TAG_SEQ_INFO_EPOCH 0x0D
#define TAG_SEQ_INFO_TS 0x0E
#define TAG_SEQ_INFO_ROW_INDEX 0x0F

#define VT_INTEGER 0x00
#define VT_DOUBLE 0x01
#define VT_BOOLEAN 0x02
#define VT_STRING 0x03
#define VT_NULL 0x06
#define VT_BLOB 0x07

static const unsigned char HEADER[4] = {0x75, 0x00, 0x00, 0x00};
static const unsigned char SEQ_ONLY_PREFIX[9] = {0x18, 0x00, 0x00, 0x00, 0x0c, 0x13, 0x00, 0x00, 0x00};

/* ---- CRC-8: polynomial 0x07, MSB first, init 0 ------------------------------------------------------ */

static unsigned char crc_table[256];
/* crc_power[k][x]: the table applied k + 1 times. The CRC is linear, so after 8 bytes b0..b7 from state s it is
 * T^8[s ^ b0] ^ T^7[b1] ^ ... ^ T^1[b7]: eight independent lookups instead of a chain of eight. */
static unsigned char crc_power[8][256];

static void build_crc_table(void) {
    for (int i = 0; i < 256; i++) {
        unsigned int crc = (unsigned int)i;
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x80) ? ((crc << 1) ^ 0x07) & 0xFF : (crc << 1) & 0xFF;
        }
        crc_table[i] = (unsigned char)crc;
    }
    for (int i = 0; i < 256; i++) {
        crc_power[0][i] = crc_table[i];
    }
    for (int k = 1; k < 8; k++) {
        for (int i = 0; i < 256; i++) {
            crc_power[k][i] = crc_table[crc_power[k - 1][i]];
        }
    }
}

static inline unsigned int crc_fold(unsigned int crc, const unsigned char *p, Py_ssize_t len) {
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        crc = crc_power[7][crc ^ p[i]] ^ crc_power[6][p[i + 1]] ^ crc_power[5][p[i + 2]] ^
              crc_power[4][p[i + 3]] ^ crc_power[3][p[i + 4]] ^ crc_power[2][p[i + 5]] ^
              crc_power[1][p[i + 6]] ^ crc_power[0][p[i + 7]];
    }
    for (; i < len; i++) {
        crc = crc_table[crc ^ p[i]];
    }
    return crc;
}

/* ---- little-endian reads --------------------------------------------------------------------------- */

static inline uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline int64_t read_i64(const unsigned char *p) {
    uint64_t v = (uint64_t)read_u32(p) | ((uint64_t)read_u32(p + 4) << 32);
    return (int64_t)v;
}

static inline int32_t read_i32(const unsigned char *p) { return (int32_t)read_u32(p); }

/* start + len, or n + 1 ("past the end") when that would pass n: a u32 length never overflows a 32-bit
   Py_ssize_t into a negative end (which would move the decoder backwards). start <= n. */
static inline Py_ssize_t bounded_end(Py_ssize_t start, uint32_t len, Py_ssize_t n) {
    return (uint64_t)len > (uint64_t)(n - start) ? n + 1 : start + (Py_ssize_t)len;
}

/* ---- errors ---------------------------------------------------------------------------------------- */

static void raise_message(PyObject *message) {
    if (message == NULL) {
        return;
    }
    PyObject *exc = PyObject_CallOneArg(error_class, message);
    Py_DECREF(message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

static void raise_text(const char *text) { raise_message(PyUnicode_FromString(text)); }

static void raise_bad_tag(PyObject *data, Py_ssize_t pos, const char *expected) {
    PyObject *exc = PyObject_CallFunction(bad_tag_fn, "Ons", data, pos, expected);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* The pending UnicodeDecodeError's reason, the error indicator cleared (NULL if it is another error). */
static PyObject *take_decode_reason(void) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        return NULL;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *reason = value != NULL ? PyUnicodeDecodeError_GetReason(value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return reason;
}

/* ---- cell-name cache: name bytes -> (str, CRC of the name) ------------------------------------------- */

#define NAME_SLOTS 4096

typedef struct {
    unsigned char *bytes;
    Py_ssize_t len;
    uint64_t hash;
    PyObject *name;
    unsigned int crc;
} name_entry;

static name_entry name_cache[NAME_SLOTS];

static inline uint64_t name_hash(const unsigned char *p, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)len;
    for (Py_ssize_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 1099511628211ULL;
    }
    return h;
}

/* A borrowed reference to the name (the cache owns it) and its CRC; NULL with UnicodeDecodeError set. */
static PyObject *cached_name(const unsigned char *p, Py_ssize_t len, unsigned int *crc) {
    uint64_t h = name_hash(p, len);
    name_entry *slot = &name_cache[h & (NAME_SLOTS - 1)];
    if (slot->name != NULL && slot->hash == h && slot->len == len && memcmp(slot->bytes, p, (size_t)len) == 0) {
        *crc = slot->crc;
        return slot->name;
    }
    PyObject *name = PyUnicode_DecodeUTF8((const char *)p, len, NULL);
    if (name == NULL) {
        return NULL;
    }
    unsigned char *copy = PyMem_Malloc(len > 0 ? (size_t)len : 1);
    if (copy == NULL) {
        Py_DECREF(name);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, p, (size_t)len);
    PyMem_Free(slot->bytes);
    Py_XSETREF(slot->name, name);
    slot->bytes = copy;
    slot->len = len;
    slot->hash = h;
    slot->crc = crc_fold(0, p, len);
    *crc = slot->crc;
    return name;
}

/* ---- a growable array of owned references ------------------------------------------------------------ */

typedef struct {
    PyObject **items;
    Py_ssize_t len;
    Py_ssize_t cap;
    PyObject *local[32];
} objvec;

static inline void vec_init(objvec *v) {
    v->items = v->local;
    v->len = 0;
    v->cap = 32;
}

static void vec_clear(objvec *v) {
    for (Py_ssize_t i = 0; i < v->len; i++) {
        Py_DECREF(v->items[i]);
    }
    v->len = 0;
}

static void vec_free(objvec *v) {
    vec_clear(v);
    if (v->items != v->local) {
        PyMem_Free(v->items);
    }
    v->items = v->local;
    v->cap = 32;
}

/* Takes the reference; on failure releases it and returns -1 with MemoryError set. */
static int vec_push(objvec *v, PyObject *item) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap * 2;
        PyObject **items;
        if (v->items == v->local) {
            items = PyMem_Malloc((size_t)cap * sizeof(PyObject *));
            if (items != NULL) {
                memcpy(items, v->local, (size_t)v->len * sizeof(PyObject *));
            }
        } else {
            items = PyMem_Realloc(v->items, (size_t)cap * sizeof(PyObject *));
        }
        if (items == NULL) {
            Py_DECREF(item);
            PyErr_NoMemory();
            return -1;
        }
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = item;
    return 0;
}

/* A tuple (or an instance of a tuple subclass such as a NamedTuple) holding the vector's items; empties it. */
static PyObject *vec_to_tuple(objvec *v) {
    PyObject *tuple = PyTuple_New(v->len);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < v->len; i++) {
        PyTuple_SET_ITEM(tuple, i, v->items[i]);
    }
    v->len = 0;
    return tuple;
}

/* tuple.__new__(cls, items) for a NamedTuple class: steals the n references in items (even on failure). */
static PyObject *new_named(PyTypeObject *cls, PyObject **items, Py_ssize_t n) {
#if PY_VERSION_HEX >= 0x030E0000
    /* Tuples may carry more than their items from 3.14 on (a cached hash): let tuple.__new__ set them up. */
    PyObject *plain = PyTuple_New(n);
    if (plain == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_DECREF(items[i]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(plain, i, items[i]);
    }
    PyObject *args = PyTuple_Pack(1, plain);
    Py_DECREF(plain);
    if (args == NULL) {
        return NULL;
    }
    PyObject *made = PyTuple_Type.tp_new(cls, args, NULL);
    Py_DECREF(args);
    return made;
#else
    PyObject *obj = cls->tp_alloc(cls, n);
    if (obj == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_DECREF(items[i]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(obj, i, items[i]);
    }
    return obj;
#endif
}

static PyObject *new_sequence(int64_t epoch, int64_t ts, int64_t row_index) {
    PyObject *items[3];
    items[0] = PyLong_FromLongLong(epoch);
    items[1] = PyLong_FromLongLong(ts);
    items[2] = PyLong_FromLongLong(row_index);
    if (items[0] == NULL || items[1] == NULL || items[2] == NULL) {
        Py_XDECREF(items[0]);
        Py_XDECREF(items[1]);
        Py_XDECREF(items[2]);
        return NULL;
    }
    return new_named(sequence_type, items, 3);
}

/* ---- the decoder ------------------------------------------------------------------------------------- */

enum { OK = 0, FAIL = -1, TRUNCATED = -2, BAD_STRING = -3 };

/* Parse `0B len sub-blocks` at pos (decode.py's _decode_extension). */
static int decode_extension(PyObject *data, const unsigned char *d, Py_ssize_t n, Py_ssize_t pos,
                            PyObject **sequence, Py_ssize_t *end_out) {
    if (pos + 5 > n) {
        return TRUNCATED;
    }
    Py_ssize_t end = bounded_end(pos + 5, read_u32(d + pos + 1), n);
    if (end > n) {
        return TRUNCATED;
    }
    Py_ssize_t p = pos + 5;
    while (p < end) {
        unsigned char sub_tag = d[p];
        if (p + 5 > n) {
            return TRUNCATED;
        }
        Py_ssize_t sub_end = bounded_end(p + 5, read_u32(d + p + 1), n);
        if (sub_end > end) {
            raise_message(PyUnicode_FromFormat(
                "extension block at offset %zd overruns the extension ending at %zd", p, end));
            return FAIL;
        }
        if (sub_tag == TAG_SEQ_INFO) {
            if (sub_end - p != 24) {
                raise_message(PyUnicode_FromFormat(
                    "sequence info at offset %zd has length %zd, expected 19", p, sub_end - p - 5));
                return FAIL;
            }
            if (d[p + 5] != TAG_SEQ_INFO_EPOCH || d[p + 10] != TAG_SEQ_INFO_TS ||
                d[p + 19] != TAG_SEQ_INFO_ROW_INDEX) {
                raise_message(PyUnicode_FromFormat(
                    "malformed sequence info at offset %zd: expected tags 0d, 0e, 0f", p));
                return FAIL;
            }
            PyObject *seq = new_sequence(read_i32(d + p + 6), read_i64(d + p + 11), read_i32(d + p + 20));
            if (seq == NULL) {
                return FAIL;
            }
            Py_XSETREF(*sequence, seq);
        }
        p = sub_end;
    }
    (void)data;
    *end_out = end;
    return OK;
}

static void raise_crc_mismatch_cell(PyObject *name, Py_ssize_t at, unsigned int stored, unsigned int computed) {
    char tail[64];
    PyOS_snprintf(tail, sizeof(tail), "stored 0x%02x, computed 0x%02x", stored, computed);
    raise_message(PyUnicode_FromFormat("cell checksum mismatch for column %R at offset %zd: %s", name, at, tail));
}

/* Decode the rows after the header into `rows` (a list). decode.py's _decode_body, check for check. */
static int decode_body(PyObject *data, const unsigned char *d, Py_ssize_t n, PyObject *rows) {
    Py_ssize_t pos = 4;
    Py_ssize_t row_start = pos;
    int status = OK;
    objvec pk, columns;
    vec_init(&pk);
    vec_init(&columns);
    PyObject *sequence = NULL;
    /* The cells of a row usually share a timestamp: keep the last one's int object. */
    int64_t last_ts = 0;
    PyObject *last_ts_obj = NULL;

/* d[k] may be read (decode.py: an IndexError, i.e. "input truncated", otherwise). */
#define NEED(k) \
    do { \
        if ((k) >= n) { \
            status = TRUNCATED; \
            goto done; \
        } \
    } while (0)

    while (pos < n) {
        row_start = pos;
        if (d[pos] != TAG_ROW_PK) {
            raise_bad_tag(data, pos, "ROW_PK (0x01) starting a row");
            status = FAIL;
            goto done;
        }
        pos += 1;
        unsigned int row_crc = 0;
        int in_pk = 1;
        objvec *target = &pk;
        NEED(pos);
        unsigned char tag = d[pos];
        for (;;) {
            if (tag == TAG_CELL) {
                /* -- one cell: 03 04 len name [05 len type payload] [06 op] [07 ts] 0A crc */
                if (pos + 6 > n) {
                    status = TRUNCATED;
                    goto done;
                }
                Py_ssize_t end = bounded_end(pos + 6, read_u32(d + pos + 2), n);
                if (d[pos + 1] != TAG_CELL_NAME) {
                    raise_bad_tag(data, pos + 1, "CELL_NAME (0x04)");
                    status = FAIL;
                    goto done;
                }
                if (end > n) {
                    status = TRUNCATED;
                    goto done;
                }
                unsigned int crc;
                PyObject *name = cached_name(d + pos + 6, end - pos - 6, &crc);
                if (name == NULL) {
                    PyObject *reason = take_decode_reason();
                    if (reason != NULL) {
                        raise_message(PyUnicode_FromFormat("cell name at offset %zd is not valid UTF-8: %U",
                                                           pos + 6, reason));
                        Py_DECREF(reason);
                    }
                    status = FAIL;
                    goto done;
                }
                pos = end;
                NEED(pos);
                tag = d[pos];
                PyObject *value = NULL; /* owned */
                if (tag == TAG_CELL_VALUE) {
                    Py_ssize_t vs = pos + 5;
                    Py_ssize_t ve;
                    NEED(vs);
                    unsigned char vt = d[vs];
                    if (vt == VT_STRING || vt == VT_BLOB) {
                        if (vs + 5 > n) {
                            status = TRUNCATED;
                            goto done;
                        }
                        ve = bounded_end(vs + 5, read_u32(d + vs + 1), n);
                        if (ve > n) {
                            status = TRUNCATED;
                            goto done;
                        }
                        if (vt == VT_STRING) {
                            value = PyUnicode_DecodeUTF8((const char *)d + vs + 5, ve - vs - 5, NULL);
                            if (value == NULL) {
                                PyObject *reason = take_decode_reason();
                                if (reason != NULL) {
                                    raise_message(PyUnicode_FromFormat(
                                        "string value in the row at offset %zd is not UTF-8: %U", row_start,
                                        reason));
                                    Py_DECREF(reason);
                                }
                                status = FAIL;
                                goto done;
                            }
                        } else {
                            value = PyBytes_FromStringAndSize((const char *)d + vs + 5, ve - vs - 5);
                            if (value == NULL) {
                                status = FAIL;
                                goto done;
                            }
                        }
                    } else if (vt == VT_INTEGER || vt == VT_DOUBLE) {
                        if (vs + 9 > n) {
                            status = TRUNCATED;
                            goto done;
                        }
                        if (vt == VT_INTEGER) {
                            value = PyLong_FromLongLong(read_i64(d + vs + 1));
                        } else {
                            double x = PyFloat_Unpack8((const char *)d + vs + 1, 1);
                            value = (x == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(x);
                        }
                        if (value == NULL) {
                            status = FAIL;
                            goto done;
                        }
                        ve = vs + 9;
                    } else if (vt == VT_BOOLEAN) {
                        NEED(vs + 1);
                        value = Py_NewRef(d[vs + 1] != 0 ? Py_True : Py_False);
                        ve = vs + 2;
                    } else if (sentinel_by_type[vt] != NULL) {
                        value = Py_NewRef(sentinel_by_type[vt]);
                        ve = vs + 1;
                    } else if (vt == VT_NULL) {
                        value = Py_NewRef(Py_None);
                        ve = vs + 1;
                    } else {
                        char text[80];
                        PyOS_snprintf(text, sizeof(text), "unknown value type 0x%02x at offset %zd", vt, vs);
                        raise_text(text);
                        status = FAIL;
                        goto done;
                    }
                    crc = crc_fold(crc, d + vs, ve - vs);
                    pos = ve;
                    if (pos >= n) {
                        Py_DECREF(value);
                        status = TRUNCATED;
                        goto done;
                    }
                    tag = d[pos];
                } else {
                    value = Py_NewRef(Py_None);
                }
                PyObject *op;
                PyObject *timestamp = NULL; /* owned */
                if (tag == TAG_CELL_TIMESTAMP) { /* the usual case: a version, no cell op */
                    op = op_put;
                    if (pos + 9 > n) {
                        Py_DECREF(value);
                        status = TRUNCATED;
                        goto done;
                    }
                    if (!in_pk) {
                        int64_t ts = read_i64(d + pos + 1);
                        if (last_ts_obj == NULL || ts != last_ts) {
                            PyObject *obj = PyLong_FromLongLong(ts);
                            if (obj == NULL) {
                                Py_DECREF(value);
                                status = FAIL;
                                goto done;
                            }
                            Py_XSETREF(last_ts_obj, obj);
                            last_ts = ts;
                        }
                        timestamp = Py_NewRef(last_ts_obj);
                    }
                    crc = crc_fold(crc, d + pos + 1, 8);
                    pos += 9;
                    if (pos >= n) {
                        Py_DECREF(value);
                        Py_XDECREF(timestamp);
                        status = TRUNCATED;
                        goto done;
                    }
                    tag = d[pos];
                } else if (tag == TAG_CELL_TYPE) { /* update/delete cells: op, then maybe a timestamp */
                    if (pos + 1 >= n) {
                        Py_DECREF(value);
                        status = TRUNCATED;
                        goto done;
                    }
                    unsigned char op_byte = d[pos + 1];
                    op = op_by_byte[op_byte];
                    if (op == NULL) {
                        Py_DECREF(value);
                        char text[80];
                        PyOS_snprintf(text, sizeof(text), "unknown cell op 0x%02x at offset %zd", op_byte,
                                      pos + 1);
                        raise_text(text);
                        status = FAIL;
                        goto done;
                    }
                    pos += 2;
                    if (pos >= n) {
                        Py_DECREF(value);
                        status = TRUNCATED;
                        goto done;
                    }
                    tag = d[pos];
                    if (tag == TAG_CELL_TIMESTAMP) {
                        if (pos + 9 > n) {
                            Py_DECREF(value);
                            status = TRUNCATED;
                            goto done;
                        }
                        if (!in_pk) {
                            timestamp = PyLong_FromLongLong(read_i64(d + pos + 1));
                            if (timestamp == NULL) {
                                Py_DECREF(value);
                                status = FAIL;
                                goto done;
                            }
                        }
                        crc = crc_fold(crc, d + pos + 1, 8);
                        pos += 9;
                        if (pos >= n) {
                            Py_DECREF(value);
                            Py_XDECREF(timestamp);
                            status = TRUNCATED;
                            goto done;
                        }
                        tag = d[pos];
                    }
                    crc = crc_table[crc ^ op_byte]; /* the op byte is checksummed after the timestamp */
                } else {
                    op = op_put;
                }
                if (tag != TAG_CELL_CHECKSUM) {
                    Py_DECREF(value);
                    Py_XDECREF(timestamp);
                    raise_bad_tag(data, pos, "CELL_CHECKSUM (0x0a) or a cell field");
                    status = FAIL;
                    goto done;
                }
                if (pos + 1 >= n) {
                    Py_DECREF(value);
                    Py_XDECREF(timestamp);
                    status = TRUNCATED;
                    goto done;
                }
                if (d[pos + 1] != crc) {
                    Py_DECREF(value);
                    Py_XDECREF(timestamp);
                    raise_crc_mismatch_cell(name, pos + 1, d[pos + 1], crc);
                    status = FAIL;
                    goto done;
                }
                row_crc = crc_table[row_crc ^ crc];
                pos += 2;
                PyObject *item;
                if (in_pk) {
                    item = PyTuple_New(2);
                    if (item == NULL) {
                        Py_DECREF(value);
                        status = FAIL;
                        goto done;
                    }
                    PyTuple_SET_ITEM(item, 0, Py_NewRef(name));
                    PyTuple_SET_ITEM(item, 1, value);
                } else {
                    PyObject *fields[4];
                    fields[0] = Py_NewRef(name);
                    fields[1] = value;
                    fields[2] = timestamp != NULL ? timestamp : Py_NewRef(Py_None);
                    fields[3] = Py_NewRef(op);
                    item = new_named(column_type, fields, 4);
                    if (item == NULL) {
                        status = FAIL;
                        goto done;
                    }
                }
                if (vec_push(target, item) < 0) {
                    status = FAIL;
                    goto done;
                }
                NEED(pos);
                tag = d[pos];
            } else if (tag == TAG_ROW_DATA && in_pk) {
                in_pk = 0;
                target = &columns;
                pos += 1;
                NEED(pos);
                tag = d[pos];
            } else {
                break;
            }
        }
        PyObject *delete_marker = Py_False;
        if (tag == TAG_DELETE_ROW_MARKER) {
            delete_marker = Py_True;
            row_crc = crc_table[row_crc ^ 1];
            pos += 1;
            NEED(pos);
            tag = d[pos];
        } else {
            row_crc = crc_table[row_crc];
        }
        if (tag == TAG_EXTENSION) {
            if (pos + 10 <= n && memcmp(d + pos + 1, SEQ_ONLY_PREFIX, 9) == 0) {
                /* The usual extension: sequence info only (0B 18000000 0C 13000000 0D .. 0E .. 0F ..). */
                Py_ssize_t q = pos + 10;
                if (q + 19 > n) {
                    status = TRUNCATED;
                    goto done;
                }
                if (d[q] != TAG_SEQ_INFO_EPOCH || d[q + 5] != TAG_SEQ_INFO_TS || d[q + 14] != TAG_SEQ_INFO_ROW_INDEX) {
                    raise_message(PyUnicode_FromFormat(
                        "malformed sequence info at offset %zd: expected tags 0d, 0e, 0f", pos + 5));
                    status = FAIL;
                    goto done;
                }
                sequence = new_sequence(read_i32(d + q + 1), read_i64(d + q + 6), read_i32(d + q + 15));
                if (sequence == NULL) {
                    status = FAIL;
                    goto done;
                }
                pos += 29;
            } else {
                Py_ssize_t end = 0;
                status = decode_extension(data, d, n, pos, &sequence, &end);
                if (status != OK) {
                    goto done;
                }
                pos = end;
            }
            NEED(pos);
            tag = d[pos];
        }
        if (tag != TAG_ROW_CHECKSUM) {
            raise_bad_tag(data, pos,
                          in_pk ? "CELL, ROW_DATA, DELETE_ROW_MARKER, EXTENSION or ROW_CHECKSUM (0x09)"
                                : "ROW_CHECKSUM (0x09)");
            status = FAIL;
            goto done;
        }
        NEED(pos + 1);
        if (d[pos + 1] != row_crc) {
            char text[160];
            PyOS_snprintf(text, sizeof(text),
                          "row checksum mismatch for the row starting at offset %zd: stored 0x%02x, computed 0x%02x",
                          row_start, d[pos + 1], row_crc);
            raise_text(text);
            status = FAIL;
            goto done;
        }
        pos += 2;
        PyObject *fields[4];
        fields[0] = vec_to_tuple(&pk);
        fields[1] = fields[0] != NULL ? vec_to_tuple(&columns) : NULL;
        if (fields[1] == NULL) {
            Py_XDECREF(fields[0]);
            status = FAIL;
            goto done;
        }
        fields[2] = Py_NewRef(delete_marker);
        fields[3] = sequence != NULL ? sequence : Py_NewRef(Py_None);
        sequence = NULL;
        PyObject *row = new_named(row_type, fields, 4);
        if (row == NULL) {
            status = FAIL;
            goto done;
        }
        int appended = PyList_Append(rows, row);
        Py_DECREF(row);
        if (appended < 0) {
            status = FAIL;
            goto done;
        }
    }
#undef NEED

done:
    vec_free(&pk);
    vec_free(&columns);
    Py_XDECREF(sequence);
    Py_XDECREF(last_ts_obj);
    if (status == TRUNCATED) {
        raise_message(PyUnicode_FromFormat(
            "input truncated: the row starting at offset %zd runs past the end of the %zd-byte buffer", row_start,
            n));
        return FAIL;
    }
    return status;
}

/* ---- the Python-facing functions ----------------------------------------------------------------------- */

static int ready(void) {
    if (row_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups.setup() has not been called");
        return 0;
    }
    return 1;
}

/* `data if type(data) is bytes else bytes(data)`: a new reference. */
static PyObject *as_bytes(PyObject *data) {
    if (PyBytes_CheckExact(data)) {
        return Py_NewRef(data);
    }
    return PyObject_CallOneArg((PyObject *)&PyBytes_Type, data);
}

/* Header check plus the body; returns a new list or NULL. */
static PyObject *decode_buffer(PyObject *buf) {
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(buf);
    Py_ssize_t n = PyBytes_GET_SIZE(buf);
    if (n < 4 || memcmp(d, HEADER, 4) != 0) {
        PyObject *res = PyObject_CallOneArg(check_header_fn, buf);
        if (res == NULL) {
            return NULL;
        }
        Py_DECREF(res);
    }
    PyObject *rows = PyList_New(0);
    if (rows == NULL) {
        return NULL;
    }
    int was_enabled = PyGC_Disable(); /* only acyclic tuples are allocated (see decode.gc_paused) */
    int status = decode_body(buf, d, n, rows);
    if (was_enabled) {
        PyGC_Enable();
    }
    if (status != OK) {
        Py_DECREF(rows);
        return NULL;
    }
    return rows;
}

static PyObject *py_decode_rows(PyObject *module, PyObject *data) {
    (void)module;
    if (!ready()) {
        return NULL;
    }
    int truth = PyBytes_CheckExact(data) ? PyBytes_GET_SIZE(data) > 0 : PyObject_IsTrue(data);
    if (truth < 0) {
        return NULL;
    }
    if (!truth) {
        return PyList_New(0);
    }
    PyObject *buf = as_bytes(data);
    if (buf == NULL) {
        return NULL;
    }
    PyObject *rows = decode_buffer(buf);
    Py_DECREF(buf);
    return rows;
}

static PyObject *decode_one_record(PyObject *data) {
    PyObject *buf = as_bytes(data);
    if (buf == NULL) {
        return NULL;
    }
    PyObject *rows = decode_buffer(buf);
    Py_DECREF(buf);
    if (rows == NULL) {
        return NULL;
    }
    if (PyList_GET_SIZE(rows) != 1) {
        raise_message(PyUnicode_FromFormat("a record must hold exactly one row, found %zd", PyList_GET_SIZE(rows)));
        Py_DECREF(rows);
        return NULL;
    }
    PyObject *row = Py_NewRef(PyList_GET_ITEM(rows, 0));
    Py_DECREF(rows);
    return row;
}

static PyObject *py_decode_record(PyObject *module, PyObject *data) {
    (void)module;
    if (!ready()) {
        return NULL;
    }
    return decode_one_record(data);
}

static PyObject *py_decode_record_list(PyObject *module, PyObject *records) {
    (void)module;
    if (!ready()) {
        return NULL;
    }
    PyObject *iter = PyObject_GetIter(records);
    if (iter == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        Py_DECREF(iter);
        return NULL;
    }
    int was_enabled = PyGC_Disable();
    PyObject *record;
    while ((record = PyIter_Next(iter)) != NULL) {
        PyObject *row = decode_one_record(record);
        Py_DECREF(record);
        if (row == NULL || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(row);
    }
    if (was_enabled) {
        PyGC_Enable();
    }
    Py_DECREF(iter);
    if (out != NULL && PyErr_Occurred()) {
        Py_CLEAR(out);
    }
    return out;
}

static PyObject *py_crc8(PyObject *module, PyObject *data) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    unsigned int crc = crc_fold(0, (const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static int take_type(PyObject *obj, PyTypeObject **slot, const char *what) {
    if (!PyType_Check(obj) || !PyType_IsSubtype((PyTypeObject *)obj, &PyTuple_Type) ||
        ((PyTypeObject *)obj)->tp_basicsize != PyTuple_Type.tp_basicsize ||
        ((PyTypeObject *)obj)->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must be a NamedTuple class without instance attributes", what);
        return -1;
    }
    Py_XSETREF(*slot, (PyTypeObject *)Py_NewRef(obj));
    return 0;
}

static PyObject *py_setup(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *keywords[] = {"row", "column", "sequence", "error", "bad_tag", "check_header", "put",
                               "ops", "sentinels", NULL};
    PyObject *row, *column, *seq, *error, *bad_tag, *check_header, *put, *ops, *sentinels;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOO!O!:setup", keywords, &row, &column, &seq, &error,
                                     &bad_tag, &check_header, &put, &PyDict_Type, &ops, &PyDict_Type,
                                     &sentinels)) {
        return NULL;
    }
    if (take_type(row, &row_type, "row") < 0 || take_type(column, &column_type, "column") < 0 ||
        take_type(seq, &sequence_type, "sequence") < 0) {
        return NULL;
    }
    Py_XSETREF(error_class, Py_NewRef(error));
    Py_XSETREF(bad_tag_fn, Py_NewRef(bad_tag));
    Py_XSETREF(check_header_fn, Py_NewRef(check_header));
    Py_XSETREF(op_put, Py_NewRef(put));
    PyObject *tables[2] = {ops, sentinels};
    PyObject **targets[2] = {op_by_byte, sentinel_by_type};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 256; i++) {
            Py_CLEAR(targets[t][i]);
        }
        PyObject *key, *value;
        Py_ssize_t i = 0;
        while (PyDict_Next(tables[t], &i, &key, &value)) {
            long byte = PyLong_AsLong(key);
            if (byte < 0 || byte > 255) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "setup: keys must be bytes 0..255");
                }
                return NULL;
            }
            Py_XSETREF(targets[t][byte], Py_NewRef(value));
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))py_setup, METH_VARARGS | METH_KEYWORDS,
     "setup(*, row, column, sequence, error, bad_tag, check_header, put, ops, sentinels): hand over the model "
     "classes and error helpers (implementation.py calls it once)."},
    {"decode_rows", py_decode_rows, METH_O,
     "Decode a PlainBuffer message (header + 0..n rows). Empty input gives []. CRCs verified."},
    {"decode_record", py_decode_record, METH_O,
     "Decode a tunnel/stream record: exactly one row, usually with the sequence-info extension."},
    {"decode_record_list", py_decode_record_list, METH_O,
     "decode_record over a batch (e.g. one ReadRecords response), with the cyclic GC paused."},
    {"crc8", py_crc8, METH_O, "CRC-8 (poly 0x07, init 0) of a bytes-like object."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_speedups",
    "The compiled PlainBuffer decoder and CRC-8 (optional; decode.py is the pure-Python equivalent).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    build_crc_table();
    return PyModule_Create(&module_def);
}
