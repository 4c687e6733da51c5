/*
 * Arrow column buffers filled in C: the leaf buffers of the change log (spark/arrow/changes.py's records_to_arrow) and of
 * a flat table (spark/arrow/values.py's RowsToArrow), without a Python object per row or cell, from decoded records or
 * straight from the PlainBuffer bytes (through the one parser, _parse.h: no record decoded at all).
 *
 * Part of the one compiled extension, _speedups (its init adds pb_arrow_methods to the module): built when a C
 * compiler is there, used when the compiled decoder is (implementation.py). Each function returns None for any
 * input the Python builders treat specially, so they run then and behave as before, errors included. This file
 * knows only the CPython C API (no pyarrow): spark/ turns the buffers into pyarrow arrays.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_parse.h"
#include "_records.h"

/* ---- records -> Arrow change-log columns ----------------------------------------------------------------- */
/* change_log_arrays(records, action_names, op_names): the leaf buffers of spark/arrow/changes.py's change-log table,
   filled in C from decoded Record tuples (no Python object per row or cell). Returns None when the input holds
   anything but the exact types the fast path knows (then records_to_arrow's Python path runs and behaves as
   before, errors included). */

enum { AK_I64, AK_F64, AK_BOOL, AK_STR };
enum { A_OK = 0, A_ERROR = -1, A_FALLBACK = 1 };

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} abuf;

static int abuf_reserve(abuf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra) {
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int abuf_put(abuf *b, const void *src, Py_ssize_t k) {
    if (k <= 0 || src == NULL) {
        return 0;
    }
    if (abuf_reserve(b, k) < 0) {
        return -1;
    }
    memcpy(b->p + b->len, src, (size_t)k);
    b->len += k;
    return 0;
}

/* One Arrow column being built: validity and bool values one byte per slot (packed at the end); int64/double
   values 8 bytes per slot; strings as int32 offsets plus data. */
typedef struct {
    int kind;
    Py_ssize_t n, nulls;
    abuf valid, values, data;
} acol;

static int acol_init(acol *c, int kind) {
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    if (kind == AK_STR) {
        int32_t zero = 0;
        return abuf_put(&c->values, &zero, 4);
    }
    return 0;
}

static void acol_free(acol *c) {
    PyMem_Free(c->valid.p);
    PyMem_Free(c->values.p);
    PyMem_Free(c->data.p);
    memset(c, 0, sizeof(*c));
}

static int acol_slot(acol *c, int valid, const void *value, Py_ssize_t size) {
    unsigned char v = valid ? 1 : 0;
    if (abuf_put(&c->valid, &v, 1) < 0) {
        return A_ERROR;
    }
    c->n += 1;
    c->nulls += !valid;
    if (c->kind == AK_STR) {
        if (size > 0) {
            if (c->data.len + size > INT32_MAX) {
                return A_FALLBACK; /* more than int32 offsets hold: the Python path (chunked arrays) */
            }
            if (abuf_put(&c->data, value, size) < 0) {
                return A_ERROR;
            }
        }
        int32_t end = (int32_t)c->data.len;
        return abuf_put(&c->values, &end, 4) < 0 ? A_ERROR : A_OK;
    }
    static const char zeros[8] = {0};
    return abuf_put(&c->values, valid ? value : zeros, size) < 0 ? A_ERROR : A_OK;
}

static inline int acol_null(acol *c) {
    return acol_slot(c, 0, NULL, c->kind == AK_BOOL ? 1 : (c->kind == AK_STR ? 0 : 8));
}
static inline int acol_i64(acol *c, int64_t x) { return acol_slot(c, 1, &x, 8); }
static inline int acol_f64(acol *c, double x) { return acol_slot(c, 1, &x, 8); }
static inline int acol_bool(acol *c, int x) {
    unsigned char b = x ? 1 : 0;
    return acol_slot(c, 1, &b, 1);
}
static inline int acol_str(acol *c, const char *p, Py_ssize_t len) { return acol_slot(c, 1, p, len); }

/* One byte per slot -> an LSB-first bitmap (Arrow's layout), as bytes. */
static PyObject *pack_bits(const abuf *b, Py_ssize_t n) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (n + 7) / 8);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memset(o, 0, (size_t)((n + 7) / 8));
    const unsigned char *s = (const unsigned char *)b->p;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i]) {
            o[i >> 3] |= (unsigned char)(1u << (i & 7));
        }
    }
    return out;
}

/* (length, null_count, validity bytes or None, values/offsets bytes, data bytes or None) */
static PyObject *acol_finish(acol *c) {
    PyObject *validity = c->nulls ? pack_bits(&c->valid, c->n) : Py_NewRef(Py_None);
    PyObject *values = c->kind == AK_BOOL ? pack_bits(&c->values, c->n)
                                          : PyBytes_FromStringAndSize(c->values.p ? c->values.p : "", c->values.len);
    PyObject *data = c->kind == AK_STR ? PyBytes_FromStringAndSize(c->data.p ? c->data.p : "", c->data.len)
                                       : Py_NewRef(Py_None);
    if (validity == NULL || values == NULL || data == NULL) {
        Py_XDECREF(validity);
        Py_XDECREF(values);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", c->n, c->nulls, validity, values, data);
}

/* The typed-value leaves of the change log: type name, then int, double, bool, string, binary. */
enum { TV_TYPE, TV_INT, TV_DOUBLE, TV_BOOL, TV_STRING, TV_BINARY, TV_COUNT };
static const int TV_KINDS[TV_COUNT] = {AK_STR, AK_I64, AK_F64, AK_BOOL, AK_STR, AK_STR};

static int typed_nulls_except(acol *tv, int keep) {
    for (int k = TV_INT; k < TV_COUNT; k++) {
        if (k != keep && acol_null(&tv[k]) != A_OK) {
            return A_ERROR;
        }
    }
    return A_OK;
}

#define TYPE_NAME(col, text) acol_str((col), (text), (Py_ssize_t)(sizeof(text) - 1))

static int typed_value(acol *tv, PyObject *value) {
    int st;
    if (value == Py_None) {
        if (acol_null(&tv[TV_TYPE]) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, -1);
    }
    if (value == Py_True || value == Py_False) {
        if (TYPE_NAME(&tv[TV_TYPE], "BOOLEAN") != A_OK || acol_bool(&tv[TV_BOOL], value == Py_True) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_BOOL);
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            return A_FALLBACK;
        }
        if (x == -1 && PyErr_Occurred()) {
            return A_ERROR;
        }
        if (TYPE_NAME(&tv[TV_TYPE], "INTEGER") != A_OK || acol_i64(&tv[TV_INT], x) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_INT);
    }
    if (PyFloat_CheckExact(value)) {
        if (TYPE_NAME(&tv[TV_TYPE], "DOUBLE") != A_OK || acol_f64(&tv[TV_DOUBLE], PyFloat_AS_DOUBLE(value)) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_DOUBLE);
    }
    if (PyUnicode_CheckExact(value)) {
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(value, &len);
        if (p == NULL) { /* lone surrogates: let the Python path report it */
            PyErr_Clear();
            return A_FALLBACK;
        }
        if (TYPE_NAME(&tv[TV_TYPE], "STRING") != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_STRING], p, len);
        return st != A_OK ? st : typed_nulls_except(tv, TV_STRING);
    }
    if (PyBytes_CheckExact(value)) {
        if (TYPE_NAME(&tv[TV_TYPE], "BINARY") != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_BINARY], PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        return st != A_OK ? st : typed_nulls_except(tv, TV_BINARY);
    }
    return A_FALLBACK; /* subclasses, bytes-likes, INF_MIN/INF_MAX...: the Python path decides */
}

static int utf8_of(acol *c, PyObject *text) {
    if (!PyUnicode_CheckExact(text)) {
        return A_FALLBACK;
    }
    Py_ssize_t len;
    const char *p = PyUnicode_AsUTF8AndSize(text, &len);
    if (p == NULL) {
        PyErr_Clear();
        return A_FALLBACK;
    }
    return acol_str(c, p, len);
}

/* dict lookup of an enum member's name (action_names / op_names) written as a string */
static int name_from(acol *c, PyObject *names, PyObject *key) {
    PyObject *name = PyDict_GetItemWithError(names, key); /* borrowed */
    if (name == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear(); /* unhashable: the Python path raises its own error */
        }
        return A_FALLBACK;
    }
    return utf8_of(c, name);
}

static int int_or_null(acol *c, PyObject *value) {
    if (value == Py_None) {
        return acol_null(c);
    }
    if (!PyLong_CheckExact(value)) {
        return A_FALLBACK;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        return A_FALLBACK;
    }
    if (x == -1 && PyErr_Occurred()) {
        return A_ERROR;
    }
    return acol_i64(c, x);
}

#define CL_ACTION 0
#define CL_PK 1                    /* name + TV_COUNT leaves */
#define CL_COL (CL_PK + 1 + TV_COUNT) /* name, op, timestamp + TV_COUNT leaves */
#define CL_SEQ (CL_COL + 3 + TV_COUNT)
#define CL_COUNT (CL_SEQ + 3)

#define TRY(expr) \
    do { \
        st = (expr); \
        if (st != A_OK) { \
            goto done; \
        } \
    } while (0)

/* Set up the change log's column builders (``*inited`` counts those set up, for the caller to free) and the two
   list-offset buffers with their leading 0. Returns -1 with the exception set. */
static int change_log_init(acol *cols, int *inited, abuf *pk_offsets, abuf *col_offsets) {
    int32_t zero = 0;
    for (; *inited < CL_COUNT; (*inited)++) {
        int k = *inited, kind = AK_STR;
        if (k >= CL_PK + 1 && k < CL_COL) {
            kind = TV_KINDS[k - CL_PK - 1];
        } else if (k == CL_COL + 2 || k >= CL_SEQ) {
            kind = AK_I64;
        } else if (k >= CL_COL + 3 && k < CL_SEQ) {
            kind = TV_KINDS[k - CL_COL - 3];
        }
        if (acol_init(&cols[k], kind) < 0) {
            return -1;
        }
    }
    if (abuf_put(pk_offsets, &zero, 4) < 0 || abuf_put(col_offsets, &zero, 4) < 0) {
        return -1;
    }
    return 0;
}

/* The change-log builders' answer for status st: (n, pk offsets, column offsets, *leaf buffers) when A_OK, None
   for A_FALLBACK, NULL with the exception set for A_ERROR; the builders' buffers are freed either way. */
static PyObject *change_log_result(int st, Py_ssize_t n, abuf *pk_offsets, abuf *col_offsets, acol *cols,
                                   int inited) {
    PyObject *out = NULL;
    if (st == A_OK) {
        out = PyTuple_New(CL_COUNT + 3);
        if (out != NULL) {
            PyTuple_SET_ITEM(out, 0, PyLong_FromSsize_t(n));
            PyTuple_SET_ITEM(out, 1, PyBytes_FromStringAndSize(pk_offsets->p, pk_offsets->len));
            PyTuple_SET_ITEM(out, 2, PyBytes_FromStringAndSize(col_offsets->p, col_offsets->len));
            for (int k = 0; k < CL_COUNT; k++) {
                PyTuple_SET_ITEM(out, 3 + k, acol_finish(&cols[k]));
            }
            for (int k = 0; k < CL_COUNT + 3; k++) {
                if (PyTuple_GET_ITEM(out, k) == NULL) {
                    Py_CLEAR(out);
                    break;
                }
            }
        }
    } else if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    for (int k = 0; k < inited; k++) {
        acol_free(&cols[k]);
    }
    PyMem_Free(pk_offsets->p);
    PyMem_Free(col_offsets->p);
    return out;
}

static PyObject *py_change_log_arrays(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *records, *action_names, *op_names;
    if (!PyArg_ParseTuple(args, "OO!O!:change_log_arrays", &records, &PyDict_Type, &action_names, &PyDict_Type,
                          &op_names)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    acol cols[CL_COUNT];
    abuf pk_offsets = {0}, col_offsets = {0};
    int st = A_OK;
    int inited = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (change_log_init(cols, &inited, &pk_offsets, &col_offsets) < 0) {
        st = A_ERROR;
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *record = items[r];
        if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) < 4) {
            st = A_FALLBACK;
            goto done;
        }
        TRY(name_from(&cols[CL_ACTION], action_names, PyTuple_GET_ITEM(record, 0)));
        PyObject *pk = PyTuple_GET_ITEM(record, 1);
        if (!PyTuple_Check(pk)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pk); i++) {
            PyObject *item = PyTuple_GET_ITEM(pk, i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                st = A_FALLBACK;
                goto done;
            }
            TRY(utf8_of(&cols[CL_PK], PyTuple_GET_ITEM(item, 0)));
            TRY(typed_value(&cols[CL_PK + 1], PyTuple_GET_ITEM(item, 1)));
        }
        PyObject *columns = PyTuple_GET_ITEM(record, 2);
        if (!PyTuple_Check(columns)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++) {
            PyObject *col = PyTuple_GET_ITEM(columns, i);
            if (!PyTuple_Check(col) || PyTuple_GET_SIZE(col) != 4) {
                st = A_FALLBACK;
                goto done;
            }
            TRY(utf8_of(&cols[CL_COL], PyTuple_GET_ITEM(col, 0)));
            TRY(name_from(&cols[CL_COL + 1], op_names, PyTuple_GET_ITEM(col, 3)));
            TRY(int_or_null(&cols[CL_COL + 2], PyTuple_GET_ITEM(col, 2)));
            TRY(typed_value(&cols[CL_COL + 3], PyTuple_GET_ITEM(col, 1)));
        }
        if (cols[CL_PK].n > INT32_MAX || cols[CL_COL].n > INT32_MAX) {
            st = A_FALLBACK;
            goto done;
        }
        int32_t pk_end = (int32_t)cols[CL_PK].n, col_end = (int32_t)cols[CL_COL].n;
        if (abuf_put(&pk_offsets, &pk_end, 4) < 0 || abuf_put(&col_offsets, &col_end, 4) < 0) {
            st = A_ERROR;
            goto done;
        }
        PyObject *sequence = PyTuple_GET_ITEM(record, 3);
        if (sequence == Py_None) {
            for (int k = 0; k < 3; k++) {
                TRY(acol_null(&cols[CL_SEQ + k]));
            }
        } else {
            if (!PyTuple_Check(sequence) || PyTuple_GET_SIZE(sequence) != 3) {
                st = A_FALLBACK;
                goto done;
            }
            for (int k = 0; k < 3; k++) {
                PyObject *part = PyTuple_GET_ITEM(sequence, k);
                if (part == Py_None) {
                    st = A_FALLBACK;
                    goto done;
                }
                TRY(int_or_null(&cols[CL_SEQ + k], part));
            }
        }
    }
done:;
    PyObject *out = change_log_result(st, n, &pk_offsets, &col_offsets, cols, inited);
    Py_DECREF(seq);
    return out;
}

#undef TYPE_NAME

/* flat_arrays(rows, specs, cells): the columns of spark/arrow/values.py's RowsToArrow, filled in C from decoded Row
   tuples. `specs` holds one (source, kind, key index) per output column: source 0 key, 1 cell (the newest
   non-null version), 2 left to the caller (the corrupt-record column), 3 versions (every version in the row's
   order, newest first: list<struct<timestamp, value>>); kind 0 INTEGER, 1 DOUBLE, 2 BOOLEAN, 3 STRING, 4 BINARY.
   `cells` maps each cell and versions column's name to its output position. Returns None when a value does not
   have its column's exact type (or a key is missing): RowsToArrow's Python path then reports or nulls it. */

enum { FK_INTEGER, FK_DOUBLE, FK_BOOLEAN, FK_STRING, FK_BINARY };
enum { FS_KEY, FS_CELL, FS_CORRUPT, FS_VERSIONS };

static int flat_value(acol *c, int kind, PyObject *value) {
    if (value == Py_None) {
        return acol_null(c);
    }
    switch (kind) {
    case FK_INTEGER:
        if (PyLong_CheckExact(value)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow) {
                return A_FALLBACK;
            }
            if (x == -1 && PyErr_Occurred()) {
                return A_ERROR;
            }
            return acol_i64(c, x);
        }
        break;
    case FK_DOUBLE:
        if (PyFloat_CheckExact(value)) {
            return acol_f64(c, PyFloat_AS_DOUBLE(value));
        }
        break;
    case FK_BOOLEAN:
        if (value == Py_True || value == Py_False) {
            return acol_bool(c, value == Py_True);
        }
        break;
    case FK_STRING:
        if (PyUnicode_CheckExact(value)) {
            return utf8_of(c, value);
        }
        break;
    case FK_BINARY:
        if (PyBytes_CheckExact(value)) {
            return acol_str(c, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        }
        break;
    }
    return A_FALLBACK;
}

/* Where a column builder stood: a row that is left out after its cells were appended is rewound to it. */
typedef struct {
    Py_ssize_t n, nulls, valid, values, data;
} acol_mark;

static inline acol_mark acol_here(const acol *c) {
    acol_mark m = {c->n, c->nulls, c->valid.len, c->values.len, c->data.len};
    return m;
}

static inline void acol_rewind(acol *c, const acol_mark *m) {
    c->n = m->n;
    c->nulls = m->nulls;
    c->valid.len = m->valid;
    c->values.len = m->values;
    c->data.len = m->data;
}

/* One slot of a list column (an AK_STR builder's validity and int32 offsets, no data): its items end at child
   `end`. */
static int acol_list_end(acol *c, int valid, Py_ssize_t end) {
    if (end > INT32_MAX) {
        return A_FALLBACK; /* more items than int32 offsets hold: the Python path */
    }
    unsigned char v = valid ? 1 : 0;
    int32_t e = (int32_t)end;
    if (abuf_put(&c->valid, &v, 1) < 0 || abuf_put(&c->values, &e, 4) < 0) {
        return A_ERROR;
    }
    c->n += 1;
    c->nulls += !valid;
    return A_OK;
}

/* The flat plan of one call: per output column its source, kind, key index and builder (a versions column's
   builder is its list: validity and offsets), plus a versions column's struct leaves and per-row state. */
typedef struct {
    Py_ssize_t width;
    int *source, *kind;
    Py_ssize_t *key_index;
    acol *cols;
    acol *stamps, *values;  /* versions: the struct's timestamp and value leaves */
    unsigned char *seen;    /* versions: the current row has a cell of the column */
    acol_mark *marks;       /* versions: where its two leaves stood when the current row began */
} flat_plan;

static void flat_plan_free(flat_plan *fp) {
    for (Py_ssize_t i = 0; fp->cols != NULL && i < fp->width; i++) {
        acol_free(&fp->cols[i]);
        acol_free(&fp->stamps[i]);
        acol_free(&fp->values[i]);
    }
    PyMem_Free(fp->source);
    PyMem_Free(fp->kind);
    PyMem_Free(fp->key_index);
    PyMem_Free(fp->cols);
    PyMem_Free(fp->stamps);
    PyMem_Free(fp->values);
    PyMem_Free(fp->seen);
    PyMem_Free(fp->marks);
    memset(fp, 0, sizeof(*fp));
}

/* Parse the (source, kind, key index) specs and set up the builders. Returns -1 with an exception set (a bad
   spec, or no memory); flat_plan_free frees the plan either way. */
static int flat_plan_init(flat_plan *fp, PyObject *specs, const char *who) {
    static const int kinds[] = {AK_I64, AK_F64, AK_BOOL, AK_STR, AK_STR};
    Py_ssize_t width = PyTuple_GET_SIZE(specs);
    size_t slots = (size_t)width + 1;
    memset(fp, 0, sizeof(*fp));
    fp->source = PyMem_Calloc(slots, sizeof(int));
    fp->kind = PyMem_Calloc(slots, sizeof(int));
    fp->key_index = PyMem_Calloc(slots, sizeof(Py_ssize_t));
    fp->cols = PyMem_Calloc(slots, sizeof(acol));
    fp->stamps = PyMem_Calloc(slots, sizeof(acol));
    fp->values = PyMem_Calloc(slots, sizeof(acol));
    fp->seen = PyMem_Calloc(slots, 1);
    fp->marks = PyMem_Calloc(2 * slots, sizeof(acol_mark));
    if (fp->source == NULL || fp->kind == NULL || fp->key_index == NULL || fp->cols == NULL || fp->stamps == NULL ||
        fp->values == NULL || fp->seen == NULL || fp->marks == NULL) {
        PyMem_Free(fp->cols); /* so that flat_plan_free does not walk half-allocated builders */
        fp->cols = NULL;
        PyErr_NoMemory();
        return -1;
    }
    fp->width = width;
    for (Py_ssize_t i = 0; i < width; i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        int *source = &fp->source[i], *kind = &fp->kind[i];
        if (!PyArg_ParseTuple(spec, "iin", source, kind, &fp->key_index[i])) {
            return -1;
        }
        if (*kind < FK_INTEGER || *kind > FK_BINARY || *source < FS_KEY || *source > FS_VERSIONS) {
            PyErr_Format(PyExc_ValueError, "%s: bad spec %R", who, spec);
            return -1;
        }
        if (*source != FS_VERSIONS) {
            if (acol_init(&fp->cols[i], kinds[*kind]) < 0) {
                return -1;
            }
            continue;
        }
        if (acol_init(&fp->cols[i], AK_STR) < 0 || acol_init(&fp->stamps[i], AK_I64) < 0 ||
            acol_init(&fp->values[i], kinds[*kind]) < 0) {
            return -1;
        }
        fp->marks[2 * i] = acol_here(&fp->stamps[i]);
        fp->marks[2 * i + 1] = acol_here(&fp->values[i]);
    }
    return 0;
}

/* A versions column at the end of a row: its list slot (null when the row has no cell of it, as RowsToArrow
   gives), and where its leaves stand is the next row's start. */
static int flat_versions_end(flat_plan *fp, Py_ssize_t i) {
    int st = acol_list_end(&fp->cols[i], fp->seen[i], fp->stamps[i].n);
    fp->seen[i] = 0;
    fp->marks[2 * i] = acol_here(&fp->stamps[i]);
    fp->marks[2 * i + 1] = acol_here(&fp->values[i]);
    return st;
}

/* A versions column's cells of a row that is left out: dropped. */
static void flat_versions_drop(flat_plan *fp, Py_ssize_t i) {
    acol_rewind(&fp->stamps[i], &fp->marks[2 * i]);
    acol_rewind(&fp->values[i], &fp->marks[2 * i + 1]);
    fp->seen[i] = 0;
}

/* The plan's leaves, one per output column: None for the corrupt-record column, acol_finish's tuple, or for a
   versions column (list, timestamps, values) of those. NULL with an exception set. */
static PyObject *flat_plan_leaves(flat_plan *fp) {
    PyObject *leaves = PyList_New(fp->width);
    if (leaves == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < fp->width; i++) {
        PyObject *item;
        if (fp->source[i] == FS_CORRUPT) {
            item = Py_NewRef(Py_None);
        } else if (fp->source[i] == FS_VERSIONS) {
            PyObject *list = acol_finish(&fp->cols[i]);
            PyObject *stamps = list != NULL ? acol_finish(&fp->stamps[i]) : NULL;
            PyObject *values = stamps != NULL ? acol_finish(&fp->values[i]) : NULL;
            item = values != NULL ? PyTuple_Pack(3, list, stamps, values) : NULL;
            Py_XDECREF(list);
            Py_XDECREF(stamps);
            Py_XDECREF(values);
        } else {
            item = acol_finish(&fp->cols[i]);
        }
        if (item == NULL) {
            Py_DECREF(leaves);
            return NULL;
        }
        PyList_SET_ITEM(leaves, i, item);
    }
    return leaves;
}

static PyObject *py_flat_arrays(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *rows, *specs, *cells;
    if (!PyArg_ParseTuple(args, "OO!O!:flat_arrays", &rows, &PyTuple_Type, &specs, &PyDict_Type, &cells)) {
        return NULL;
    }
    flat_plan fp;
    PyObject **held = NULL; /* borrowed: this row's newest non-null value per cell column */
    PyObject *seq = NULL, *out = NULL;
    int st = A_OK;
    if (flat_plan_init(&fp, specs, "flat_arrays") < 0) {
        st = A_ERROR;
        goto done;
    }
    Py_ssize_t width = fp.width;
    held = PyMem_Calloc((size_t)width + 1, sizeof(PyObject *));
    if (held == NULL) {
        PyErr_NoMemory();
        st = A_ERROR;
        goto done;
    }
    seq = PySequence_Fast(rows, "rows must be a sequence");
    if (seq == NULL) {
        st = A_ERROR;
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = items[r];
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 2) {
            st = A_FALLBACK;
            goto done;
        }
        PyObject *pk = PyTuple_GET_ITEM(row, 0);
        PyObject *columns = PyTuple_GET_ITEM(row, 1);
        if (!PyTuple_Check(pk) || !PyTuple_Check(columns)) {
            st = A_FALLBACK;
            goto done;
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            held[i] = NULL;
        }
        for (Py_ssize_t c = 0; c < PyTuple_GET_SIZE(columns); c++) { /* newest version first per name */
            PyObject *column = PyTuple_GET_ITEM(columns, c);
            if (!PyTuple_Check(column) || PyTuple_GET_SIZE(column) < 2) {
                st = A_FALLBACK;
                goto done;
            }
            PyObject *position = PyDict_GetItemWithError(cells, PyTuple_GET_ITEM(column, 0));
            if (position == NULL) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                    st = A_FALLBACK;
                    goto done;
                }
                continue;
            }
            Py_ssize_t i = PyLong_AsSsize_t(position);
            if (i < 0 || i >= width || (fp.source[i] != FS_CELL && fp.source[i] != FS_VERSIONS)) {
                if (PyErr_Occurred()) {
                    PyErr_Clear();
                }
                st = A_FALLBACK;
                goto done;
            }
            PyObject *value = PyTuple_GET_ITEM(column, 1);
            if (fp.source[i] == FS_VERSIONS) {
                if (PyTuple_GET_SIZE(column) < 3) {
                    st = A_FALLBACK;
                    goto done;
                }
                fp.seen[i] = 1;
                TRY(int_or_null(&fp.stamps[i], PyTuple_GET_ITEM(column, 2)));
                TRY(flat_value(&fp.values[i], fp.kind[i], value));
            } else if (held[i] == NULL && value != Py_None) { /* RowsToArrow: the first non-null version */
                held[i] = value;
            }
        }
        for (Py_ssize_t i = 0; i < width; i++) {
            if (fp.source[i] == FS_KEY) {
                if (fp.key_index[i] < 0 || fp.key_index[i] >= PyTuple_GET_SIZE(pk)) {
                    st = A_FALLBACK;
                    goto done;
                }
                PyObject *item = PyTuple_GET_ITEM(pk, fp.key_index[i]);
                if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || PyTuple_GET_ITEM(item, 1) == Py_None) {
                    st = A_FALLBACK;
                    goto done;
                }
                TRY(flat_value(&fp.cols[i], fp.kind[i], PyTuple_GET_ITEM(item, 1)));
            } else if (fp.source[i] == FS_CELL) {
                TRY(flat_value(&fp.cols[i], fp.kind[i], held[i] != NULL ? held[i] : Py_None));
            } else if (fp.source[i] == FS_VERSIONS) {
                TRY(flat_versions_end(&fp, i));
            }
        }
    }
    out = flat_plan_leaves(&fp);
    if (out == NULL) {
        st = A_ERROR;
    }
done:
    if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    flat_plan_free(&fp);
    PyMem_Free(held);
    Py_XDECREF(seq);
    return st == A_ERROR ? NULL : out;
}

/* ---- PlainBuffer bytes -> Arrow, straight ------------------------------------------------------------------- */
/* The same columns as change_log_arrays and flat_arrays, but parsed from the PlainBuffer bytes by the shared
   parser (client/plainbuffer/_parse.h) with visitors that append to the column builders: no Row, Column or value
   object at all. Any parse failure, invalid UTF-8, or value the fast path does not take returns None: the caller
   then decodes to objects, which raises decode.py's exact error or builds the table the Python way. */

enum { V_FALLBACK = 1, V_ERROR = 2 }; /* visitor stops: fall back to the object path / a Python error is set */

static int visit_status(int st) { return st == A_OK ? 0 : (st == A_FALLBACK ? V_FALLBACK : V_ERROR); }

typedef struct {
    int vt;
    const unsigned char *p;
    Py_ssize_t len;
} pb_value;

/* A value's payload as a checked value: strings must be UTF-8 (the object path would raise otherwise). */
static int take_value(pb_value *slot, int vt, const unsigned char *p, Py_ssize_t len) {
    if (vt == VT_STRING && !pb_utf8_valid(p, len)) {
        return V_FALLBACK;
    }
    slot->vt = vt;
    slot->p = p;
    slot->len = len;
    return 0;
}

static int take_name(const unsigned char *p, Py_ssize_t len, unsigned int *crc) {
    if (!pb_utf8_valid(p, len)) {
        return V_FALLBACK;
    }
    *crc = crc_fold(0, p, len);
    return 0;
}

static inline double value_double(const pb_value *v) { return PyFloat_Unpack8((const char *)v->p, 1); }

/* A parsed value into the typed-value leaves (typed_value's rules; the sentinels are the Python path's). */
static int typed_parsed(acol *tv, const pb_value *v) {
    int st;
    switch (v->vt) {
    case VT_NULL:
    case VT_ABSENT:
        if (acol_null(&tv[TV_TYPE]) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, -1);
    case VT_BOOLEAN:
        if (acol_str(&tv[TV_TYPE], "BOOLEAN", 7) != A_OK || acol_bool(&tv[TV_BOOL], v->p[0] != 0) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_BOOL);
    case VT_INTEGER:
        if (acol_str(&tv[TV_TYPE], "INTEGER", 7) != A_OK || acol_i64(&tv[TV_INT], read_i64(v->p)) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_INT);
    case VT_DOUBLE:
        if (acol_str(&tv[TV_TYPE], "DOUBLE", 6) != A_OK || acol_f64(&tv[TV_DOUBLE], value_double(v)) != A_OK) {
            return A_ERROR;
        }
        return typed_nulls_except(tv, TV_DOUBLE);
    case VT_STRING:
        if (acol_str(&tv[TV_TYPE], "STRING", 6) != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_STRING], (const char *)v->p, v->len);
        return st != A_OK ? st : typed_nulls_except(tv, TV_STRING);
    case VT_BLOB:
        if (acol_str(&tv[TV_TYPE], "BINARY", 6) != A_OK) {
            return A_ERROR;
        }
        st = acol_str(&tv[TV_BINARY], (const char *)v->p, v->len);
        return st != A_OK ? st : typed_nulls_except(tv, TV_BINARY);
    }
    return A_FALLBACK; /* INF_MIN, INF_MAX, AUTO_INCREMENT: records_to_arrow raises for them */
}

/* What a visitor holds of the cell being read: its name and value, pointing into the buffer. The visitors that keep
   them start with it, so one pair of name and value callbacks serves them all. */
typedef struct {
    const unsigned char *name;
    Py_ssize_t name_len;
    pb_value value;
} cell_seen;

static int seen_name(void *ctx, const unsigned char *p, Py_ssize_t len, Py_ssize_t at, unsigned int *crc) {
    cell_seen *cell = ctx;
    (void)at;
    cell->name = p;
    cell->name_len = len;
    return take_name(p, len, crc);
}

static int seen_value(void *ctx, int vt, const unsigned char *p, Py_ssize_t len, Py_ssize_t row_start) {
    (void)row_start;
    return take_value(&((cell_seen *)ctx)->value, vt, p, len);
}

/* -- the change log from tunnel record bodies */

typedef struct {
    cell_seen cell; /* first: seen_name and seen_value take the visitor as it */
    acol *cols;
    Py_ssize_t rows; /* rows seen in the current body */
    int has_seq;
    int64_t seq[3];
} log_visitor;

static const char *const OP_NAMES[5] = {"PUT", "DELETE_ALL_VERSIONS", NULL, "DELETE_ONE_VERSION", "INCREMENT"};

static int log_cell(void *ctx, int in_pk, int has_ts, int64_t ts, int op) {
    log_visitor *lv = ctx;
    acol *cols = lv->cols;
    int st;
    if (in_pk) {
        st = acol_str(&cols[CL_PK], (const char *)lv->cell.name, lv->cell.name_len);
        if (st == A_OK) {
            st = typed_parsed(&cols[CL_PK + 1], &lv->cell.value);
        }
        return visit_status(st);
    }
    const char *op_name = OP_NAMES[op == OP_PUT ? 0 : op];
    st = acol_str(&cols[CL_COL], (const char *)lv->cell.name, lv->cell.name_len);
    if (st == A_OK) {
        st = acol_str(&cols[CL_COL + 1], op_name, (Py_ssize_t)strlen(op_name));
    }
    if (st == A_OK) {
        st = has_ts ? acol_i64(&cols[CL_COL + 2], ts) : acol_null(&cols[CL_COL + 2]);
    }
    if (st == A_OK) {
        st = typed_parsed(&cols[CL_COL + 3], &lv->cell.value);
    }
    return visit_status(st);
}

static int log_row(void *ctx, int deleted, const pb_sequence *seq) {
    log_visitor *lv = ctx;
    (void)deleted; /* a record's action says what it does */
    lv->rows += 1;
    lv->has_seq = seq != NULL;
    if (seq != NULL) {
        lv->seq[0] = seq->epoch;
        lv->seq[1] = seq->timestamp;
        lv->seq[2] = seq->row_index;
    }
    return lv->rows > 1 ? V_FALLBACK : 0; /* a record holds one row: decode_record raises otherwise */
}

static const pb_visitor LOG_VISITOR = {seen_name, seen_value, log_cell, log_row};

static const char *const ACTION_NAMES[4] = {NULL, "PUT_ROW", "UPDATE_ROW", "DELETE_ROW"};

/* A record body's check without output (an origin record): decode_record would decode it. */
typedef struct {
    cell_seen cell;
    Py_ssize_t rows;
} check_visitor;

static int check_row_cb(void *ctx, int deleted, const pb_sequence *seq) {
    (void)deleted;
    (void)seq;
    return ++((check_visitor *)ctx)->rows > 1 ? V_FALLBACK : 0;
}

static const pb_visitor CHECK_VISITOR = {seen_name, seen_value, pb_ignore_cell, check_row_cb};

/* An origin record's body (len 0: none): A_OK when decode_record would decode it, else A_FALLBACK (it raises on
   the object path), or A_ERROR. The change log and the flat batch keep nothing of it. */
static int origin_checked(const unsigned char *body, Py_ssize_t len) {
    if (len == 0) {
        return A_OK;
    }
    if (len < 4 || memcmp(body, PB_HEADER, 4) != 0) {
        return A_FALLBACK;
    }
    check_visitor cv;
    memset(&cv, 0, sizeof(cv));
    pb_error err;
    int rc = pb_parse(body, len, 4, &CHECK_VISITOR, &cv, &err);
    if (rc != PB_OK) {
        return rc == V_ERROR ? A_ERROR : A_FALLBACK;
    }
    return cv.rows == 1 ? A_OK : A_FALLBACK;
}


/* change_log_from_bodies(data, spans, actions, origin_spans=None): change_log_arrays' answer, from the tunnel
   records' PlainBuffer bodies (data[start:end] for each int64 (start, end) pair of `spans`) and action types, or
   None (see above). Origin records (origin_spans into data; an empty span: none) are only checked. */
static PyObject *py_change_log_from_bodies(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data_obj, *spans_obj, *actions, *origins_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O:change_log_from_bodies", &data_obj, &spans_obj, &actions, &origins_obj)) {
        return NULL;
    }
    pb_records in;
    if (pb_records_get(&in, data_obj, spans_obj, actions, origins_obj, "change_log_from_bodies") < 0) {
        return NULL;
    }
    acol cols[CL_COUNT];
    abuf pk_offsets = {0}, col_offsets = {0};
    int st = A_OK;
    int inited = 0;
    Py_ssize_t n = in.count;
    const unsigned char *action_bytes = in.actions.buf;
    if (change_log_init(cols, &inited, &pk_offsets, &col_offsets) < 0) {
        st = A_ERROR;
        goto done;
    }
    log_visitor lv;
    memset(&lv, 0, sizeof(lv));
    lv.cols = cols;
    for (Py_ssize_t r = 0; r < n; r++) {
        unsigned char action = action_bytes[r];
        const unsigned char *d;
        Py_ssize_t len;
        if (action < 1 || action > 3 || !pb_record_at(&in, r, 0, &d, &len)) {
            st = A_FALLBACK;
            goto done;
        }
        if (len < 4 || memcmp(d, PB_HEADER, 4) != 0) {
            st = A_FALLBACK;
            goto done;
        }
        st = acol_str(&cols[CL_ACTION], ACTION_NAMES[action], (Py_ssize_t)strlen(ACTION_NAMES[action]));
        if (st != A_OK) {
            goto done;
        }
        lv.rows = 0;
        pb_error err;
        int rc = pb_parse(d, len, 4, &LOG_VISITOR, &lv, &err);
        if (rc != PB_OK || lv.rows != 1) {
            st = rc == V_ERROR ? A_ERROR : A_FALLBACK;
            goto done;
        }
        /* an origin record is not in the change log, but checked as decoding checks it */
        st = pb_record_at(&in, r, 1, &d, &len) ? origin_checked(d, len) : A_FALLBACK;
        if (st != A_OK) {
            goto done;
        }
        if (cols[CL_PK].n > INT32_MAX || cols[CL_COL].n > INT32_MAX) {
            st = A_FALLBACK;
            goto done;
        }
        int32_t pk_end = (int32_t)cols[CL_PK].n, col_end = (int32_t)cols[CL_COL].n;
        if (abuf_put(&pk_offsets, &pk_end, 4) < 0 || abuf_put(&col_offsets, &col_end, 4) < 0) {
            st = A_ERROR;
            goto done;
        }
        for (int k = 0; k < 3; k++) {
            st = lv.has_seq ? acol_i64(&cols[CL_SEQ + k], lv.seq[k]) : acol_null(&cols[CL_SEQ + k]);
            if (st != A_OK) {
                goto done;
            }
        }
    }
done:;
    PyObject *out = change_log_result(st, n, &pk_offsets, &col_offsets, cols, inited);
    pb_records_release(&in);
    return out;
}

/* -- flat columns from a GetRange rows blob, or from tunnel records */

typedef struct {
    const char *p;
    Py_ssize_t len;
    Py_ssize_t position;
} flat_name;

typedef struct {
    cell_seen cell; /* first: seen_name and seen_value take the visitor as it */
    flat_plan *plan;
    flat_name *names; /* the cell and versions columns' names, open addressing by flat_hash */
    Py_ssize_t slots;
    pb_value *held;   /* per cell column: this row's value (vt VT_ABSENT: none yet) */
    int64_t *held_ts; /* records: the held value's timestamp (none counts as 0) */
    pb_value *pk;     /* this row's key values */
    Py_ssize_t pk_len, pk_cap;
    /* which rows to leave out (what RowsToArrow.page's Python path leaves out) */
    const char *fence;
    Py_ssize_t fence_len;
    const char *suffix;
    Py_ssize_t suffix_len;
    int drop_empty;
    const char *ignored;
    Py_ssize_t ignored_len;
    Py_ssize_t row_cells, row_fences, row_others;
    int has_fence;
    int64_t fence_ts;
    pb_value fence_value;
    int row_misfit; /* a version that does not fit its column: fall back, unless the row is left out */
    Py_ssize_t kept;
    struct pending_version *pending; /* records: this row's PUT versions of versions columns, sorted at its end */
    Py_ssize_t pending_len, pending_cap;
} flat_visitor;

static inline uint64_t flat_hash(const unsigned char *p, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)len;
    for (Py_ssize_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 1099511628211ULL;
    }
    return h;
}

static Py_ssize_t flat_lookup(const flat_visitor *fv, const unsigned char *p, Py_ssize_t len) {
    if (fv->slots == 0) {
        return -1;
    }
    Py_ssize_t mask = fv->slots - 1;
    for (Py_ssize_t i = (Py_ssize_t)(flat_hash(p, len) & (uint64_t)mask);; i = (i + 1) & mask) {
        const flat_name *slot = &fv->names[i];
        if (slot->p == NULL) {
            return -1;
        }
        if (slot->len == len && memcmp(slot->p, p, (size_t)len) == 0) {
            return slot->position;
        }
    }
}

/* The visitor's name table and per-row state for `cells` (name -> output position of a cell or versions
   column). A_OK, A_FALLBACK (a key that is not a str, a position that is not such a column) or A_ERROR. */
static int flat_visitor_init(flat_visitor *fv, flat_plan *fp, PyObject *cells) {
    Py_ssize_t slots = 8;
    while (slots < 2 * PyDict_GET_SIZE(cells) + 2) {
        slots *= 2;
    }
    fv->plan = fp;
    fv->names = PyMem_Calloc((size_t)slots, sizeof(flat_name));
    fv->held = PyMem_Calloc((size_t)fp->width + 1, sizeof(pb_value));
    fv->held_ts = PyMem_Calloc((size_t)fp->width + 1, sizeof(int64_t));
    if (fv->names == NULL || fv->held == NULL || fv->held_ts == NULL) {
        PyErr_NoMemory();
        return A_ERROR;
    }
    fv->slots = slots;
    for (Py_ssize_t i = 0; i < fp->width; i++) {
        fv->held[i].vt = VT_ABSENT;
    }
    PyObject *key, *position;
    Py_ssize_t at = 0;
    while (PyDict_Next(cells, &at, &key, &position)) {
        Py_ssize_t len;
        const char *p = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, &len) : NULL;
        Py_ssize_t i = PyLong_Check(position) ? PyLong_AsSsize_t(position) : -1;
        if (p == NULL || i < 0 || i >= fp->width || (fp->source[i] != FS_CELL && fp->source[i] != FS_VERSIONS)) {
            PyErr_Clear();
            return A_FALLBACK;
        }
        Py_ssize_t mask = slots - 1;
        Py_ssize_t s = (Py_ssize_t)(flat_hash((const unsigned char *)p, len) & (uint64_t)mask);
        while (fv->names[s].p != NULL) {
            s = (s + 1) & mask;
        }
        fv->names[s].p = p; /* the dict's str keys own these bytes for the whole call */
        fv->names[s].len = len;
        fv->names[s].position = i;
    }
    return A_OK;
}

static void flat_visitor_free(flat_visitor *fv) {
    PyMem_Free(fv->pending);
    PyMem_Free(fv->names);
    PyMem_Free(fv->held);
    PyMem_Free(fv->held_ts);
    PyMem_Free(fv->pk);
}

static inline int same_name(const unsigned char *p, Py_ssize_t len, const char *q, Py_ssize_t qlen) {
    return q != NULL && len == qlen && memcmp(p, q, (size_t)len) == 0;
}

static int flat_key_cell(flat_visitor *fv) {
    if (fv->pk_len == fv->pk_cap) {
        Py_ssize_t cap = fv->pk_cap ? fv->pk_cap * 2 : 8;
        pb_value *pk = PyMem_Realloc(fv->pk, (size_t)cap * sizeof(pb_value));
        if (pk == NULL) {
            PyErr_NoMemory();
            return V_ERROR;
        }
        fv->pk = pk;
        fv->pk_cap = cap;
    }
    fv->pk[fv->pk_len++] = fv->cell.value;
    return 0;
}

/* A parsed value into a flat column of `kind` (flat_value's rules: anything but the exact type falls back). */
static int flat_parsed(acol *c, int kind, const pb_value *v) {
    switch (v->vt) {
    case VT_NULL:
    case VT_ABSENT:
        return acol_null(c);
    case VT_INTEGER:
        return kind == FK_INTEGER ? acol_i64(c, read_i64(v->p)) : A_FALLBACK;
    case VT_DOUBLE:
        return kind == FK_DOUBLE ? acol_f64(c, value_double(v)) : A_FALLBACK;
    case VT_BOOLEAN:
        return kind == FK_BOOLEAN ? acol_bool(c, v->p[0] != 0) : A_FALLBACK;
    case VT_STRING:
        return kind == FK_STRING ? acol_str(c, (const char *)v->p, v->len) : A_FALLBACK;
    case VT_BLOB:
        return kind == FK_BINARY ? acol_str(c, (const char *)v->p, v->len) : A_FALLBACK;
    }
    return A_FALLBACK;
}

/* A GetRange cell: a key value, a version of a versions column (appended now; dropped if the row is left out),
   or a cell column's first non-null version. */
static int flat_cell_cb(void *ctx, int in_pk, int has_ts, int64_t ts, int op) {
    flat_visitor *fv = ctx;
    (void)op;
    if (in_pk) {
        return flat_key_cell(fv);
    }
    fv->row_cells += 1;
    if (same_name(fv->cell.name, fv->cell.name_len, fv->fence, fv->fence_len)) {
        /* is_tombstone: the newest fence cell (the first of equal timestamps; no timestamp counts as 0) */
        int64_t stamp = has_ts ? ts : 0;
        if (fv->row_fences == 0 || stamp > fv->fence_ts) {
            fv->fence_ts = stamp;
            fv->fence_value = fv->cell.value;
        }
        fv->row_fences += 1;
    }
    if (!same_name(fv->cell.name, fv->cell.name_len, fv->ignored, fv->ignored_len)) {
        fv->row_others += 1;
    }
    Py_ssize_t i = flat_lookup(fv, fv->cell.name, fv->cell.name_len);
    if (i < 0) {
        return 0;
    }
    flat_plan *fp = fv->plan;
    if (fp->source[i] == FS_VERSIONS) {
        fp->seen[i] = 1;
        int st = has_ts ? acol_i64(&fp->stamps[i], ts) : acol_null(&fp->stamps[i]);
        if (st == A_OK) {
            st = flat_parsed(&fp->values[i], fp->kind[i], &fv->cell.value);
        }
        if (st == A_FALLBACK) { /* decided at the row's end: a row left out does not count */
            fv->row_misfit = 1;
            st = A_OK;
        }
        return visit_status(st);
    }
    if (fv->held[i].vt == VT_ABSENT && fv->cell.value.vt != VT_NULL && fv->cell.value.vt != VT_ABSENT) {
        fv->held[i] = fv->cell.value; /* RowsToArrow: the first non-null version (newest first) */
    }
    return 0;
}

static int flat_row_cb(void *ctx, int deleted, const pb_sequence *seq) {
    flat_visitor *fv = ctx;
    flat_plan *fp = fv->plan;
    (void)deleted;
    (void)seq;
    int skip = 0;
    if (fv->fence != NULL && fv->row_fences > 0 && fv->row_fences == fv->row_cells) {
        const pb_value *v = &fv->fence_value;
        skip = v->vt == VT_STRING && v->len >= fv->suffix_len &&
               memcmp(v->p + v->len - fv->suffix_len, fv->suffix, (size_t)fv->suffix_len) == 0;
    }
    if (fv->drop_empty && fv->row_others == 0) {
        skip = 1;
    }
    int st = skip || !fv->row_misfit ? A_OK : A_FALLBACK;
    for (Py_ssize_t i = 0; i < fp->width && st == A_OK; i++) {
        if (skip) {
            if (fp->source[i] == FS_VERSIONS) {
                flat_versions_drop(fp, i);
            }
        } else if (fp->source[i] == FS_KEY) {
            Py_ssize_t k = fp->key_index[i];
            if (k < 0 || k >= fv->pk_len || fv->pk[k].vt == VT_NULL || fv->pk[k].vt == VT_ABSENT) {
                st = A_FALLBACK;
            } else {
                st = flat_parsed(&fp->cols[i], fp->kind[i], &fv->pk[k]);
            }
        } else if (fp->source[i] == FS_CELL) {
            st = flat_parsed(&fp->cols[i], fp->kind[i], &fv->held[i]);
        } else if (fp->source[i] == FS_VERSIONS) {
            st = flat_versions_end(fp, i);
        }
    }
    fv->kept += !skip;
    fv->pk_len = 0;
    fv->row_cells = fv->row_fences = fv->row_others = 0;
    fv->row_misfit = 0;
    for (Py_ssize_t i = 0; i < fp->width; i++) {
        fv->held[i].vt = VT_ABSENT;
    }
    return visit_status(st);
}

static const pb_visitor FLAT_VISITOR = {seen_name, seen_value, flat_cell_cb, flat_row_cb};

/* UTF-8 of a str argument, or NULL (None, or an error set: *failed). */
static const char *utf8_arg(PyObject *obj, Py_ssize_t *len, int *failed) {
    *len = 0;
    if (obj == Py_None) {
        return NULL;
    }
    const char *p = PyUnicode_Check(obj) ? PyUnicode_AsUTF8AndSize(obj, len) : NULL;
    if (p == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "expected a str or None");
        }
        *failed = 1;
    }
    return p;
}

/* flat_from_rows(data, specs, cells, fence, suffix, drop_empty, ignored): flat_arrays' answer from a GetRange
   rows blob, as (rows kept, leaves); rows that are tombstones (every cell the `fence` column, the newest a string
   ending in `suffix`) and, with drop_empty, rows without a cell other than `ignored` are left out. None: the
   object path decides. */
static PyObject *py_flat_from_rows(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data, *specs, *cells, *fence_obj, *suffix_obj, *ignored_obj;
    int drop_empty;
    if (!PyArg_ParseTuple(args, "SO!O!OOpO:flat_from_rows", &data, &PyTuple_Type, &specs, &PyDict_Type, &cells,
                          &fence_obj, &suffix_obj, &drop_empty, &ignored_obj)) {
        return NULL;
    }
    flat_visitor fv;
    memset(&fv, 0, sizeof(fv));
    int failed = 0;
    fv.fence = utf8_arg(fence_obj, &fv.fence_len, &failed);
    fv.suffix = utf8_arg(suffix_obj, &fv.suffix_len, &failed);
    fv.ignored = utf8_arg(ignored_obj, &fv.ignored_len, &failed);
    fv.drop_empty = drop_empty;
    if (failed) {
        return NULL;
    }
    if (fv.fence != NULL && fv.suffix == NULL) {
        PyErr_SetString(PyExc_ValueError, "flat_from_rows: a fence needs its tombstone suffix");
        return NULL;
    }
    flat_plan fp;
    PyObject *out = NULL;
    int st = flat_plan_init(&fp, specs, "flat_from_rows") < 0 ? A_ERROR : flat_visitor_init(&fv, &fp, cells);
    if (st != A_OK) {
        goto done;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (n > 0) {
        if (n < 4 || memcmp(d, PB_HEADER, 4) != 0) {
            st = A_FALLBACK;
            goto done;
        }
        pb_error err;
        int rc = pb_parse(d, n, 4, &FLAT_VISITOR, &fv, &err);
        if (rc != PB_OK) {
            st = rc == V_ERROR ? A_ERROR : A_FALLBACK;
            goto done;
        }
    }
    PyObject *leaves = flat_plan_leaves(&fp);
    out = leaves != NULL ? Py_BuildValue("(nN)", fv.kept, leaves) : NULL;
    if (out == NULL) {
        st = A_ERROR;
    }
done:
    if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    flat_plan_free(&fp);
    flat_visitor_free(&fv);
    return st == A_ERROR ? NULL : out;
}

/* -- flat columns from tunnel records: the streaming source's user schema */

/* A PUT version of a versions column in a record, kept until the record's end. */
struct pending_version {
    Py_ssize_t column, order;
    int64_t stamp; /* the sort key: no timestamp counts as 0 */
    int has_ts;
    int64_t ts;
    pb_value value;
};

/* ChangeOutput's order of a record's versions: by column, newest first (no timestamp counting as 0), then as the
   record holds them (its sort is stable). */
static int pending_order(const void *a, const void *b) {
    const struct pending_version *x = a, *y = b;
    if (x->column != y->column) {
        return x->column < y->column ? -1 : 1;
    }
    if (x->stamp != y->stamp) {
        return x->stamp > y->stamp ? -1 : 1;
    }
    return x->order < y->order ? -1 : (x->order > y->order);
}

/* A record's cell: a key value; a PUT version of a versions column, kept to be sorted at the record's end; or a
   PUT version of a cell column, held when it is newer than the one held (no timestamp counts as 0; of equal
   timestamps the first): ChangeOutput's newest PUT value. Deletes and increments set nothing. */
static int record_cell_cb(void *ctx, int in_pk, int has_ts, int64_t ts, int op) {
    flat_visitor *fv = ctx;
    if (in_pk) {
        return flat_key_cell(fv);
    }
    if (op != OP_PUT) {
        return 0;
    }
    Py_ssize_t i = flat_lookup(fv, fv->cell.name, fv->cell.name_len);
    int64_t stamp = has_ts ? ts : 0;
    if (i >= 0 && fv->plan->source[i] == FS_VERSIONS) {
        if (fv->pending_len == fv->pending_cap) {
            Py_ssize_t cap = fv->pending_cap ? fv->pending_cap * 2 : 16;
            struct pending_version *grown = PyMem_Realloc(fv->pending, (size_t)cap * sizeof(*grown));
            if (grown == NULL) {
                PyErr_NoMemory();
                return V_ERROR;
            }
            fv->pending = grown;
            fv->pending_cap = cap;
        }
        struct pending_version *v = &fv->pending[fv->pending_len];
        v->column = i;
        v->order = fv->pending_len++;
        v->stamp = stamp;
        v->has_ts = has_ts;
        v->ts = ts;
        v->value = fv->cell.value;
        return 0;
    }
    if (fv->cell.value.vt == VT_NULL || fv->cell.value.vt == VT_ABSENT) {
        return 0;
    }
    if (i >= 0 && (fv->held[i].vt == VT_ABSENT || stamp > fv->held_ts[i])) {
        fv->held[i] = fv->cell.value;
        fv->held_ts[i] = stamp;
    }
    return 0;
}

/* A record's end: its versions, sorted, into their columns' leaves; then the row as flat_row_cb makes it. */
static int record_row_cb(void *ctx, int deleted, const pb_sequence *seq) {
    flat_visitor *fv = ctx;
    flat_plan *fp = fv->plan;
    if (fv->pending_len > 1) {
        qsort(fv->pending, (size_t)fv->pending_len, sizeof(*fv->pending), pending_order);
    }
    for (Py_ssize_t k = 0; k < fv->pending_len; k++) {
        const struct pending_version *v = &fv->pending[k];
        Py_ssize_t i = v->column;
        fp->seen[i] = 1;
        int st = v->has_ts ? acol_i64(&fp->stamps[i], v->ts) : acol_null(&fp->stamps[i]);
        if (st == A_OK) {
            st = flat_parsed(&fp->values[i], fp->kind[i], &v->value);
        }
        if (st == A_FALLBACK) {
            fv->row_misfit = 1;
        } else if (st == A_ERROR) {
            return V_ERROR;
        }
    }
    fv->pending_len = 0;
    return flat_row_cb(ctx, deleted, seq);
}

static const pb_visitor RECORD_VISITOR = {seen_name, seen_value, record_cell_cb, record_row_cb};


static int pb_status(int rc) { return rc == PB_OK ? A_OK : (rc == V_ERROR ? A_ERROR : A_FALLBACK); }

/* flat_from_records(data, spans, actions, specs, cells, with_action, origin_spans=None): the flat batch of the
   streaming source's user schema from tunnel records kept encoded, as (records, flat_arrays' leaves, the
   actions' string leaf or None). Record i's PlainBuffer body is data[spans[i]] (native int64 start, end pairs)
   and its action type actions[i] (1 PUT_ROW, 2 UPDATE_ROW, 3 DELETE_ROW); each becomes one row: its key, and
   per cell column its newest PUT value (record_cell_cb). Origin records (origin_spans into data; an empty span:
   none) give nothing but are checked as decoding checks them; a versions column holds each PUT version, newest
   first (record_row_cb). None: the object path decides (a bad span, body or action type, a value that does not
   fit its column). */
static PyObject *py_flat_from_records(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data_obj, *spans_obj, *actions_obj, *specs, *cells, *origins_obj = Py_None;
    int with_action;
    if (!PyArg_ParseTuple(args, "OOOO!O!p|O:flat_from_records", &data_obj, &spans_obj, &actions_obj, &PyTuple_Type,
                          &specs, &PyDict_Type, &cells, &with_action, &origins_obj)) {
        return NULL;
    }
    pb_records in;
    if (pb_records_get(&in, data_obj, spans_obj, actions_obj, origins_obj, "flat_from_records") < 0) {
        return NULL;
    }
    flat_plan fp;
    flat_visitor fv;
    acol action_col;
    PyObject *out = NULL;
    int st = A_OK;
    memset(&fp, 0, sizeof(fp));
    memset(&fv, 0, sizeof(fv));
    memset(&action_col, 0, sizeof(action_col));
    Py_ssize_t n = in.count;
    if (flat_plan_init(&fp, specs, "flat_from_records") < 0 || acol_init(&action_col, AK_STR) < 0) {
        st = A_ERROR;
        goto done;
    }
    TRY(flat_visitor_init(&fv, &fp, cells));
    const unsigned char *action_bytes = in.actions.buf;
    for (Py_ssize_t r = 0; r < n; r++) {
        const unsigned char *body;
        Py_ssize_t len;
        unsigned char action = action_bytes[r];
        if (action < 1 || action > 3) {
            st = A_FALLBACK;
            goto done;
        }
        TRY(pb_record_at(&in, r, 0, &body, &len) ? A_OK : A_FALLBACK);
        if (len < 4 || memcmp(body, PB_HEADER, 4) != 0) {
            st = A_FALLBACK;
            goto done;
        }
        pb_error err;
        TRY(pb_status(pb_parse(body, len, 4, &RECORD_VISITOR, &fv, &err)));
        if (fv.kept != r + 1) { /* a record holds exactly one row: decode_record raises otherwise */
            st = A_FALLBACK;
            goto done;
        }
        if (with_action) {
            TRY(acol_str(&action_col, ACTION_NAMES[action], (Py_ssize_t)strlen(ACTION_NAMES[action])));
        }
        TRY(pb_record_at(&in, r, 1, &body, &len) ? A_OK : A_FALLBACK);
        TRY(origin_checked(body, len));
    }
    PyObject *leaves = flat_plan_leaves(&fp);
    PyObject *action_leaf = leaves == NULL ? NULL : with_action ? acol_finish(&action_col) : Py_NewRef(Py_None);
    if (action_leaf == NULL) {
        Py_XDECREF(leaves);
        st = A_ERROR;
        goto done;
    }
    out = Py_BuildValue("(nNN)", n, leaves, action_leaf);
    if (out == NULL) {
        st = A_ERROR;
    }
done:
    if (st == A_FALLBACK) {
        out = Py_NewRef(Py_None);
    }
    flat_plan_free(&fp);
    flat_visitor_free(&fv);
    acol_free(&action_col);
    pb_records_release(&in);
    return st == A_ERROR ? NULL : out;
}

#undef TRY

/* Added to the _speedups module by its init (_speedups.c). */
PB_SHARED PyMethodDef pb_arrow_methods[] = {
    {"change_log_arrays", py_change_log_arrays, METH_VARARGS,
     "change_log_arrays(records, action_names, op_names): the change log's Arrow leaf buffers (changes.py), "
     "or None when the records hold values only the Python path handles."},
    {"flat_arrays", py_flat_arrays, METH_VARARGS,
     "flat_arrays(rows, specs, cells): the key, cell and versions columns of arrow.py's RowsToArrow as Arrow "
     "buffers, or None when a value does not have its column's exact type."},
    {"change_log_from_bodies", py_change_log_from_bodies, METH_VARARGS,
     "change_log_from_bodies(data, spans, actions, origin_spans=None): change_log_arrays' answer straight from tunnel record bodies "
     "(PlainBuffer, data[start:end] per int64 pair of spans) and their action types (bytes), or None: decode them "
     "to records instead."},
    {"flat_from_rows", py_flat_from_rows, METH_VARARGS,
     "flat_from_rows(data, specs, cells, fence, suffix, drop_empty, ignored): (rows kept, flat_arrays' leaves) "
     "straight from a GetRange rows blob, tombstones and empty rows left out, or None: decode it instead."},
    {"flat_from_records", py_flat_from_records, METH_VARARGS,
     "flat_from_records(data, spans, actions, specs, cells, with_action, origin_spans=None): (records, "
     "flat_arrays' leaves, action leaf or None) of the streaming source's user schema straight from tunnel "
     "records (each key, each cell column's newest PUT value), or None: decode them instead."},
    {NULL, NULL, 0, NULL},
};
