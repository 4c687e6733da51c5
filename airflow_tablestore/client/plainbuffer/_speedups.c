/*
 * The compiled PlainBuffer extension's module and its decoder: bytes -> Row tuples with every CRC-8 verified, and a
 * CRC-8 of long inputs. The extension's other file, _arrow.c, adds the Arrow builders to this module at init.
 *
 * A drop-in for the pure-Python decoder of decode.py, written against the CPython C API only. It must give
 * exactly what decode.py gives: the same objects (Row, Column, SequenceInfo, CellOp members, sentinels, in the
 * same order) and, for truncated or corrupted input, the same exception class with the same message. So every
 * check happens in the order decode.py makes it; decode.py's module docstring and _decode_body are the
 * specification. The model classes, the PlainBufferError class and the two error helpers of format.py
 * (bad_tag, check_header) are handed over once by setup() (see implementation.py), so this file imports nothing.
 *
 * The parsing itself is _parse.h (shared with the Arrow builders of _arrow.c); this file is its
 * object-building visitor and the translation of a parse failure into decode.py's exception. For the records of
 * the tunnel (client/records.py) it also scans sequence timestamps without building rows, and splits a
 * ReadRecords answer into the places of its records' bodies, so that no Python object is made per record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_parse.h"
#include "_records.h"

/* ---- CRC-8 (_parse.h): polynomial 0x07, MSB first, init 0; the tables of every file of the extension ------ */

PB_SHARED unsigned char pb_crc_table[256];
PB_SHARED unsigned char pb_crc_power[8][256];

PB_SHARED void pb_build_crc_table(void) {
    for (int i = 0; i < 256; i++) {
        unsigned int crc = (unsigned int)i;
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x80) ? ((crc << 1) ^ 0x07) & 0xFF : (crc << 1) & 0xFF;
        }
        pb_crc_table[i] = (unsigned char)crc;
    }
    for (int i = 0; i < 256; i++) {
        pb_crc_power[0][i] = pb_crc_table[i];
    }
    for (int k = 1; k < 8; k++) {
        for (int i = 0; i < 256; i++) {
            pb_crc_power[k][i] = pb_crc_table[pb_crc_power[k - 1][i]];
        }
    }
}

/* The Arrow builders' functions (_arrow.c), added to this module at init. */
extern PB_SHARED PyMethodDef pb_arrow_methods[];

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

/* ---- the object-building visitor ------------------------------------------------------------------------ */

enum { OBJ_FAIL = 1 }; /* a callback's failure: the Python exception is set */

typedef struct {
    objvec pk, columns;
    PyObject *rows;        /* the list being filled */
    PyObject *name;        /* the current cell's name (owned) */
    PyObject *value;       /* the current cell's value (owned until the cell is built) */
    int64_t last_ts;       /* the cells of a row usually share a timestamp: keep the last one's int object */
    PyObject *last_ts_obj;
} obj_visitor;

static int obj_name(void *ctx, const unsigned char *p, Py_ssize_t len, Py_ssize_t at, unsigned int *crc) {
    obj_visitor *o = ctx;
    PyObject *name = cached_name(p, len, crc);
    if (name == NULL) {
        PyObject *reason = take_decode_reason();
        if (reason != NULL) {
            raise_message(PyUnicode_FromFormat("cell name at offset %zd is not valid UTF-8: %U", at, reason));
            Py_DECREF(reason);
        }
        return OBJ_FAIL;
    }
    Py_XSETREF(o->name, Py_NewRef(name));
    return 0;
}

static int obj_value(void *ctx, int vt, const unsigned char *p, Py_ssize_t len, Py_ssize_t row_start) {
    obj_visitor *o = ctx;
    PyObject *value;
    switch (vt) {
    case VT_STRING:
        value = PyUnicode_DecodeUTF8((const char *)p, len, NULL);
        if (value == NULL) {
            PyObject *reason = take_decode_reason();
            if (reason != NULL) {
                raise_message(
                    PyUnicode_FromFormat("string value in the row at offset %zd is not UTF-8: %U", row_start, reason));
                Py_DECREF(reason);
            }
            return OBJ_FAIL;
        }
        break;
    case VT_BLOB:
        value = PyBytes_FromStringAndSize((const char *)p, len);
        break;
    case VT_INTEGER:
        value = PyLong_FromLongLong(read_i64(p));
        break;
    case VT_DOUBLE: {
        double x = PyFloat_Unpack8((const char *)p, 1);
        value = (x == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(x);
        break;
    }
    case VT_BOOLEAN:
        value = Py_NewRef(p[0] != 0 ? Py_True : Py_False);
        break;
    case VT_NULL:
    case VT_ABSENT:
        value = Py_NewRef(Py_None);
        break;
    default: /* INF_MIN, INF_MAX, AUTO_INCREMENT */
        if (sentinel_by_type[vt] == NULL) {
            PyErr_Format(PyExc_RuntimeError, "_speedups.setup() gave no sentinel for value type 0x%02x", vt);
            return OBJ_FAIL;
        }
        value = Py_NewRef(sentinel_by_type[vt]);
    }
    if (value == NULL) {
        return OBJ_FAIL;
    }
    Py_XSETREF(o->value, value);
    return 0;
}

static int obj_cell(void *ctx, int in_pk, int has_ts, int64_t ts, int op_byte) {
    obj_visitor *o = ctx;
    PyObject *value = o->value;
    o->value = NULL;
    PyObject *item;
    if (in_pk) {
        item = PyTuple_New(2);
        if (item == NULL) {
            Py_DECREF(value);
            return OBJ_FAIL;
        }
        PyTuple_SET_ITEM(item, 0, Py_NewRef(o->name));
        PyTuple_SET_ITEM(item, 1, value);
        return vec_push(&o->pk, item) < 0 ? OBJ_FAIL : 0;
    }
    PyObject *op = op_byte == OP_PUT ? op_put : op_by_byte[op_byte];
    if (op == NULL) {
        Py_DECREF(value);
        PyErr_Format(PyExc_RuntimeError, "_speedups.setup() gave no cell op for byte 0x%02x", op_byte);
        return OBJ_FAIL;
    }
    PyObject *timestamp = Py_None;
    if (has_ts) {
        if (o->last_ts_obj == NULL || ts != o->last_ts) {
            PyObject *obj = PyLong_FromLongLong(ts);
            if (obj == NULL) {
                Py_DECREF(value);
                return OBJ_FAIL;
            }
            Py_XSETREF(o->last_ts_obj, obj);
            o->last_ts = ts;
        }
        timestamp = o->last_ts_obj;
    }
    PyObject *fields[4];
    fields[0] = Py_NewRef(o->name);
    fields[1] = value;
    fields[2] = Py_NewRef(timestamp);
    fields[3] = Py_NewRef(op);
    item = new_named(column_type, fields, 4);
    if (item == NULL) {
        return OBJ_FAIL;
    }
    return vec_push(&o->columns, item) < 0 ? OBJ_FAIL : 0;
}

static int obj_row(void *ctx, int deleted, const pb_sequence *seq) {
    obj_visitor *o = ctx;
    PyObject *fields[4];
    fields[0] = vec_to_tuple(&o->pk);
    fields[1] = fields[0] != NULL ? vec_to_tuple(&o->columns) : NULL;
    if (fields[1] == NULL) {
        Py_XDECREF(fields[0]);
        return OBJ_FAIL;
    }
    fields[2] = Py_NewRef(deleted ? Py_True : Py_False);
    fields[3] = seq != NULL ? new_sequence(seq->epoch, seq->timestamp, seq->row_index) : Py_NewRef(Py_None);
    if (fields[3] == NULL) {
        Py_DECREF(fields[0]);
        Py_DECREF(fields[1]);
        Py_DECREF(fields[2]);
        return OBJ_FAIL;
    }
    PyObject *row = new_named(row_type, fields, 4);
    if (row == NULL) {
        return OBJ_FAIL;
    }
    int appended = PyList_Append(o->rows, row);
    Py_DECREF(row);
    return appended < 0 ? OBJ_FAIL : 0;
}

static const pb_visitor OBJECT_VISITOR = {obj_name, obj_value, obj_cell, obj_row};

/* A parse failure as decode.py's exception, with its message. `name`: the failing cell's name (cell CRC). */
static void raise_parse_error(PyObject *data, Py_ssize_t n, const pb_error *err, PyObject *name) {
    char text[160];
    switch (err->kind) {
    case PB_E_TRUNCATED:
        raise_message(PyUnicode_FromFormat(
            "input truncated: the row starting at offset %zd runs past the end of the %zd-byte buffer", err->pos, n));
        return;
    case PB_E_BAD_TAG:
        raise_bad_tag(data, err->pos, err->expected);
        return;
    case PB_E_EXT_OVERRUN:
        raise_message(PyUnicode_FromFormat("extension block at offset %zd overruns the extension ending at %zd",
                                           err->pos, err->aux));
        return;
    case PB_E_SEQ_LENGTH:
        raise_message(PyUnicode_FromFormat("sequence info at offset %zd has length %zd, expected 19", err->pos,
                                           err->aux));
        return;
    case PB_E_SEQ_TAGS:
        raise_message(
            PyUnicode_FromFormat("malformed sequence info at offset %zd: expected tags 0d, 0e, 0f", err->pos));
        return;
    case PB_E_VALUE_TYPE:
        PyOS_snprintf(text, sizeof(text), "unknown value type 0x%02x at offset %zd", err->byte, err->pos);
        raise_text(text);
        return;
    case PB_E_CELL_OP:
        PyOS_snprintf(text, sizeof(text), "unknown cell op 0x%02x at offset %zd", err->byte, err->pos);
        raise_text(text);
        return;
    case PB_E_CELL_CRC: {
        char tail[64];
        PyOS_snprintf(tail, sizeof(tail), "stored 0x%02x, computed 0x%02x", err->stored, err->computed);
        raise_message(PyUnicode_FromFormat("cell checksum mismatch for column %R at offset %zd: %s", name, err->pos,
                                           tail));
        return;
    }
    case PB_E_ROW_CRC:
        PyOS_snprintf(text, sizeof(text),
                      "row checksum mismatch for the row starting at offset %zd: stored 0x%02x, computed 0x%02x",
                      err->pos, err->stored, err->computed);
        raise_text(text);
        return;
    }
    PyErr_SetString(PyExc_RuntimeError, "PlainBuffer parse failed for an unknown reason");
}

/* Parse the rows after the header into `rows` (a list): pb_parse's status; on PB_ERROR, *err and the name of the
   cell being read (a new reference in *name, or NULL) say what failed, with no exception set. */
static int visit_rows(const unsigned char *d, Py_ssize_t n, PyObject *rows, pb_error *err, PyObject **name) {
    obj_visitor o;
    memset(&o, 0, sizeof(o));
    vec_init(&o.pk);
    vec_init(&o.columns);
    o.rows = rows;
    int rc = pb_parse(d, n, 4, &OBJECT_VISITOR, &o, err);
    vec_free(&o.pk);
    vec_free(&o.columns);
    *name = o.name;
    Py_XDECREF(o.value);
    Py_XDECREF(o.last_ts_obj);
    return rc;
}

/* Decode the rows after the header into `rows` (a list): 0, or -1 with the exception set. */
static int decode_body(PyObject *data, const unsigned char *d, Py_ssize_t n, PyObject *rows) {
    pb_error err;
    PyObject *name;
    int rc = visit_rows(d, n, rows, &err, &name);
    if (rc == PB_ERROR) {
        raise_parse_error(data, n, &err, name);
    }
    Py_XDECREF(name);
    return rc == PB_OK ? 0 : -1;
}

/* ---- scanning records without building them -------------------------------------------------------------- */

enum { SCAN_REFUSE = 1 };

typedef struct {
    Py_ssize_t rows;
    int has_seq;
    int64_t seq_ts;
} scan_visitor;

static int scan_name(void *ctx, const unsigned char *p, Py_ssize_t len, Py_ssize_t at, unsigned int *crc) {
    (void)ctx;
    (void)at;
    if (!pb_utf8_valid(p, len)) {
        return SCAN_REFUSE;
    }
    *crc = crc_fold(0, p, len);
    return 0;
}

static int scan_value(void *ctx, int vt, const unsigned char *p, Py_ssize_t len, Py_ssize_t row_start) {
    (void)ctx;
    (void)row_start;
    return vt == VT_STRING && !pb_utf8_valid(p, len) ? SCAN_REFUSE : 0;
}

static int scan_row(void *ctx, int deleted, const pb_sequence *seq) {
    scan_visitor *s = ctx;
    (void)deleted;
    s->rows += 1;
    s->has_seq = seq != NULL;
    s->seq_ts = seq != NULL ? seq->timestamp : 0;
    return 0;
}

static const pb_visitor SCAN_VISITOR = {scan_name, scan_value, pb_ignore_cell, scan_row};

/* A buffer argument's bytes (a new buffer view to release), or -1 with the exception set. */
static int spans_arg(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (view->len % 16 != 0) {
        PyErr_Format(PyExc_ValueError, "%s: spans must be int64 (start, end) pairs", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* scan_records(data, spans, until_us, start, skip_empty): (index of the first record from `start` on whose
   sequence timestamp is at or past until_us -- the record count if none or until_us is None --, the newest sequence
   timestamp from `start` on or None), having checked that every record decodes (one row, CRCs, UTF-8); records are
   data[start:end] for each int64 (start, end) pair of `spans`, and with skip_empty empty ones are passed over (no
   origin record). None when one would not decode: decode_record then raises its exact error. No object is made
   per record. */
static PyObject *py_scan_records(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data_obj, *spans_obj, *until_obj;
    Py_ssize_t start;
    int skip_empty;
    if (!PyArg_ParseTuple(args, "OOOnp:scan_records", &data_obj, &spans_obj, &until_obj, &start, &skip_empty)) {
        return NULL;
    }
    int bounded = until_obj != Py_None;
    long long until = 0;
    if (bounded) {
        until = PyLong_AsLongLong(until_obj);
        if (until == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    Py_buffer data, spans;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (spans_arg(spans_obj, &spans, "scan_records") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    const unsigned char *base = data.buf;
    Py_ssize_t count = spans.len / 16;
    Py_ssize_t first = count;
    int has_max = 0, ok = 1;
    int64_t max_ts = 0;
    for (Py_ssize_t i = 0; i < count && ok; i++) {
        Py_ssize_t lo, hi;
        if (!pb_span(spans.buf, i, data.len, &lo, &hi)) {
            ok = 0;
            break;
        }
        if (skip_empty && lo == hi) {
            continue;
        }
        const unsigned char *d = base + lo;
        Py_ssize_t n = hi - lo;
        scan_visitor s = {0, 0, 0};
        pb_error err;
        if (n < 4 || memcmp(d, PB_HEADER, 4) != 0 || pb_parse(d, n, 4, &SCAN_VISITOR, &s, &err) != PB_OK ||
            s.rows != 1) {
            ok = 0;
            break;
        }
        if (i < start || !s.has_seq) {
            continue;
        }
        if (bounded && first == count && s.seq_ts >= until) {
            first = i;
        }
        if (!has_max || s.seq_ts > max_ts) {
            has_max = 1;
            max_ts = s.seq_ts;
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    if (!ok) {
        Py_RETURN_NONE;
    }
    if (has_max) {
        return Py_BuildValue("(nL)", first, (long long)max_ts);
    }
    return Py_BuildValue("(nO)", first, Py_None);
}

/* shift_spans(spans, delta): the pairs of `spans` with `delta` added to both ends (records.py's concat). */
static PyObject *py_shift_spans(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *spans_obj;
    long long delta;
    if (!PyArg_ParseTuple(args, "OL:shift_spans", &spans_obj, &delta)) {
        return NULL;
    }
    Py_buffer spans;
    if (spans_arg(spans_obj, &spans, "shift_spans") < 0) {
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, spans.len);
    if (out != NULL) {
        unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
        const unsigned char *src = spans.buf;
        for (Py_ssize_t i = 0; i < spans.len; i += 8) {
            uint64_t v;
            memcpy(&v, src + i, 8);
            v += (uint64_t)delta; /* wraps instead of overflowing: such a span is refused where it is used */
            memcpy(dst + i, &v, 8);
        }
    }
    PyBuffer_Release(&spans);
    return out;
}

/* ---- ReadRecords answers: the records' places in the body, without an object per record ---------------- */

/* A protobuf base-128 varint at *pos, before `end`, in its shortest form and at most `max_bytes` long (5 for tags
   and lengths, as upb reads them; 10 for values): 1, or 0 otherwise. Runtimes differ on padded forms (upb takes a
   padded tag, the pure-Python runtime makes it an unknown field), so those are left to the runtime in use. */
static int wire_varint(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out, int max_bytes) {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes && *pos < end; i++) {
        unsigned char b = d[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return i == 0 || b != 0; /* a last byte of 0 after others: padded */
        }
    }
    return 0;
}

#define WIRE_SHORT 5  /* tags and lengths */
#define WIRE_LONG 10  /* values */

/* A length-delimited field's bounds after its tag: 1, or 0 when it does not fit before `end`. */
static int wire_bytes(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t *lo, Py_ssize_t *hi) {
    uint64_t len;
    if (!wire_varint(d, end, pos, &len, WIRE_SHORT) || len > (uint64_t)(end - *pos)) {
        return 0;
    }
    *lo = *pos;
    *hi = *lo + (Py_ssize_t)len;
    *pos = *hi;
    return 1;
}

/* The wire tags (field number << 3 | wire type) of the messages read here (ots_tunnel.proto). */
enum {
    WIRE_RECORDS = (1 << 3) | 2,       /* ReadRecordsResponse.records */
    WIRE_NEXT_TOKEN = (2 << 3) | 2,    /* ReadRecordsResponse.next_token */
    WIRE_MAY_MORE = (3 << 3) | 0,      /* ReadRecordsResponse.may_more_record */
    WIRE_ACTION = (1 << 3) | 0,        /* Record.action_type */
    WIRE_BODY = (2 << 3) | 2,          /* Record.record */
    WIRE_ORIGIN = (3 << 3) | 2,        /* Record.origin_record */
};

/* One Record message in d[pos:end]: its action (1..3) and the bounds of its body and origin record (lo == hi: none).
   1, or 0 when it is not of the plain shape (each field once, action and body present, nothing else). */
static int wire_record(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end, unsigned char *action,
                       int64_t body[2], int64_t origin[2]) {
    int seen = 0;
    origin[0] = origin[1] = 0;
    while (pos < end) {
        uint64_t tag, value;
        Py_ssize_t lo, hi;
        if (!wire_varint(d, end, &pos, &tag, WIRE_SHORT)) {
            return 0;
        }
        int bit = tag == WIRE_ACTION ? 1 : tag == WIRE_BODY ? 2 : tag == WIRE_ORIGIN ? 4 : 0;
        if (bit == 0 || (seen & bit)) {
            return 0;
        }
        seen |= bit;
        if (bit == 1) {
            if (!wire_varint(d, end, &pos, &value, WIRE_LONG) || value < 1 || value > 3) {
                return 0; /* an unknown action: the protobuf runtime's rules for closed enums apply */
            }
            *action = (unsigned char)value;
            continue;
        }
        if (!wire_bytes(d, end, &pos, &lo, &hi)) {
            return 0;
        }
        int64_t *target = bit == 2 ? body : origin;
        target[0] = lo;
        target[1] = hi;
    }
    return (seen & 3) == 3;
}

typedef struct {
    Py_ssize_t count;
    int any_origin;
    Py_ssize_t token_lo, token_hi;
    int may_more; /* -1: absent */
} wire_answer;

/* Walk a ReadRecordsResponse; with `spans` (and `actions`, `origins`) set, fill one entry per record. 1, or 0
   when it is not of the plain shape (records, then next_token and may_more_record at most once each; any order). */
static int wire_answer_walk(const unsigned char *d, Py_ssize_t n, wire_answer *a, unsigned char *spans,
                            unsigned char *actions, unsigned char *origins) {
    Py_ssize_t pos = 0;
    int have_token = 0;
    a->count = 0;
    a->any_origin = 0;
    a->may_more = -1;
    while (pos < n) {
        uint64_t tag, value;
        Py_ssize_t lo, hi;
        if (!wire_varint(d, n, &pos, &tag, WIRE_SHORT)) {
            return 0;
        }
        if (tag == WIRE_RECORDS) {
            unsigned char action = 0;
            int64_t body[2], origin[2];
            if (!wire_bytes(d, n, &pos, &lo, &hi) || !wire_record(d, lo, hi, &action, body, origin)) {
                return 0;
            }
            a->any_origin |= origin[1] > origin[0];
            if (spans != NULL) {
                memcpy(spans + 16 * a->count, body, 16);
                memcpy(origins + 16 * a->count, origin, 16);
                actions[a->count] = action;
            }
            a->count += 1;
        } else if (tag == WIRE_NEXT_TOKEN && !have_token) {
            if (!wire_bytes(d, n, &pos, &a->token_lo, &a->token_hi)) {
                return 0;
            }
            have_token = 1;
        } else if (tag == WIRE_MAY_MORE && a->may_more < 0) {
            if (!wire_varint(d, n, &pos, &value, WIRE_LONG)) {
                return 0;
            }
            a->may_more = value != 0;
        } else {
            return 0;
        }
    }
    return have_token;
}

/* split_read_records(body): a ReadRecordsResponse body as (spans, actions, origin_spans or None, next_token,
   may_more_record or None), where spans are the int64 (start, end) pairs of each record's PlainBuffer body in
   `body` and origin_spans those of its origin record ((0, 0) for none; None when no record has one). None when the
   answer is not of the plain shape the emulator and the service send (a field twice, an unknown field, an action
   outside 1..3, a next_token that is not UTF-8, malformed wire data): the protobuf runtime parses it instead. */
static PyObject *py_split_read_records(PyObject *module, PyObject *body) {
    (void)module;
    if (!PyBytes_CheckExact(body)) {
        PyErr_SetString(PyExc_TypeError, "split_read_records: expected bytes");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(body);
    Py_ssize_t n = PyBytes_GET_SIZE(body);
    wire_answer a;
    if (!wire_answer_walk(d, n, &a, NULL, NULL, NULL)) {
        Py_RETURN_NONE;
    }
    PyObject *token = PyUnicode_DecodeUTF8((const char *)d + a.token_lo, a.token_hi - a.token_lo, "strict");
    if (token == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *spans = PyBytes_FromStringAndSize(NULL, 16 * a.count);
    PyObject *actions = PyBytes_FromStringAndSize(NULL, a.count);
    PyObject *origins = PyBytes_FromStringAndSize(NULL, 16 * a.count);
    if (spans == NULL || actions == NULL || origins == NULL) {
        Py_XDECREF(spans);
        Py_XDECREF(actions);
        Py_XDECREF(origins);
        Py_DECREF(token);
        return NULL;
    }
    wire_answer again;
    wire_answer_walk(d, n, &again, (unsigned char *)PyBytes_AS_STRING(spans),
                     (unsigned char *)PyBytes_AS_STRING(actions), (unsigned char *)PyBytes_AS_STRING(origins));
    if (!a.any_origin) {
        Py_SETREF(origins, Py_NewRef(Py_None));
    }
    PyObject *may_more = a.may_more < 0 ? Py_None : a.may_more ? Py_True : Py_False;
    return Py_BuildValue("(NNNNO)", spans, actions, origins, token, may_more);
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
    if (n < 4 || memcmp(d, PB_HEADER, 4) != 0) {
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
    if (status != 0) {
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

/* The one row of a record body in place: a new reference, or NULL -- with an exception set only for a failure no
   retry on the object path would explain (no memory); a body decode_record refuses sets none. */
static PyObject *record_row_in(const unsigned char *d, Py_ssize_t n) {
    if (n < 4 || memcmp(d, PB_HEADER, 4) != 0) {
        return NULL;
    }
    PyObject *rows = PyList_New(0);
    if (rows == NULL) {
        return NULL;
    }
    pb_error err;
    PyObject *name;
    int rc = visit_rows(d, n, rows, &err, &name);
    Py_XDECREF(name);
    PyObject *row = NULL;
    if (rc == PB_OK && PyList_GET_SIZE(rows) == 1) {
        row = Py_NewRef(PyList_GET_ITEM(rows, 0));
    } else if (!PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear(); /* a visitor's refusal (invalid UTF-8): the object path raises it */
    }
    Py_DECREF(rows);
    return row;
}

/* decode_records(data, spans, actions, origin_spans, record, members): the Record tuples of tunnel records kept in
   one buffer (records.py's Records: data[start:end] per int64 pair of spans; action types 1..3 picking
   members[action]; origin records by origin_spans, None, or an empty span for none), with the cyclic GC paused;
   what _decode in records.py makes from each body's decode_record. None when a record would not decode (or has
   another action): that loop then raises its exact error. */
static PyObject *py_decode_records(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data_obj, *spans_obj, *actions_obj, *origins_obj, *record_cls, *members;
    if (!PyArg_ParseTuple(args, "OOOOO!O!:decode_records", &data_obj, &spans_obj, &actions_obj, &origins_obj,
                          &PyType_Type, &record_cls, &PyTuple_Type, &members)) {
        return NULL;
    }
    if (!ready()) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(members) != 4 || !PyType_IsSubtype((PyTypeObject *)record_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_ValueError, "decode_records: expects a tuple type and 4 action members");
        return NULL;
    }
    pb_records in;
    if (pb_records_get(&in, data_obj, spans_obj, actions_obj, origins_obj, "decode_records") < 0) {
        return NULL;
    }
    Py_ssize_t n = in.count;
    int fallback = 0;
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        pb_records_release(&in);
        return NULL;
    }
    int was_enabled = PyGC_Disable(); /* only acyclic tuples are allocated (see decode.gc_paused) */
    const unsigned char *action_bytes = in.actions.buf;
    for (Py_ssize_t r = 0; r < n; r++) {
        const unsigned char *body, *origin_body;
        Py_ssize_t len, origin_len;
        unsigned char action = action_bytes[r];
        if (action < 1 || action > 3 || !pb_record_at(&in, r, 0, &body, &len) ||
            !pb_record_at(&in, r, 1, &origin_body, &origin_len)) {
            fallback = 1;
            break;
        }
        PyObject *row = record_row_in(body, len);
        PyObject *origin = row != NULL && origin_len > 0 ? record_row_in(origin_body, origin_len) : NULL;
        if (row == NULL || (origin_len > 0 && origin == NULL)) {
            Py_XDECREF(row);
            fallback = !PyErr_Occurred();
            break;
        }
        PyObject *items[5] = {
            Py_NewRef(PyTuple_GET_ITEM(members, action)),
            Py_NewRef(PyTuple_GET_ITEM(row, 0)), /* Row: primary_key, columns, delete_marker, sequence */
            Py_NewRef(PyTuple_GET_ITEM(row, 1)),
            Py_NewRef(PyTuple_GET_ITEM(row, 3)),
            origin != NULL ? Py_NewRef(PyTuple_GET_ITEM(origin, 1)) : Py_NewRef(Py_None),
        };
        Py_DECREF(row);
        Py_XDECREF(origin);
        PyObject *record = new_named((PyTypeObject *)record_cls, items, 5);
        if (record == NULL) {
            break;
        }
        PyList_SET_ITEM(out, r, record);
    }
    if (was_enabled) {
        PyGC_Enable();
    }
    if (fallback || PyErr_Occurred()) {
        Py_CLEAR(out);
        if (fallback) {
            out = Py_NewRef(Py_None);
        }
    }
    pb_records_release(&in);
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
    {"scan_records", py_scan_records, METH_VARARGS,
     "scan_records(data, spans, until_us, start, skip_empty): (first index >= start with a sequence timestamp >= "
     "until_us, newest sequence timestamp from start on), every record checked; None when one does not decode."},
    {"shift_spans", py_shift_spans, METH_VARARGS, "shift_spans(spans, delta): int64 pairs with delta added."},
    {"decode_records", py_decode_records, METH_VARARGS,
     "decode_records(data, spans, actions, origin_spans, record, members): Record tuples of records kept in one "
     "buffer, or None when one would not decode (the Python loop raises its error)."},
    {"split_read_records", py_split_read_records, METH_O,
     "split_read_records(body): a ReadRecordsResponse as (spans, actions, origin_spans, next_token, may_more), "
     "or None when the protobuf runtime must parse it."},
    {"crc8", py_crc8, METH_O, "CRC-8 (poly 0x07, init 0) of a bytes-like object."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_speedups",
    "The compiled PlainBuffer decoder, CRC-8 and ReadRecords splitting (optional; pure-Python equivalents exist).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    pb_build_crc_table();
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && PyModule_AddFunctions(module, pb_arrow_methods) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
