/*
 * Tunnel records kept in one buffer (client/records.py's Records), as both files of the extension take them.
 *
 * Record i's PlainBuffer body is data[start:end] for the i-th native int64 (start, end) pair of `spans` and its
 * action type is actions[i]; origin records are placed the same way by `origin_spans` (an empty span: none), which
 * may be None. Spans come from outside (the ReadRecords split, slicing, joining), so each one is checked against
 * the data before it is read. Include after Python.h.
 */
#ifndef AIRFLOW_TABLESTORE_PLAINBUFFER_RECORDS_H
#define AIRFLOW_TABLESTORE_PLAINBUFFER_RECORDS_H

#include <stdint.h>
#include <string.h>

/* Record i's bounds from `spans` (native int64 pairs, any alignment): 1, or 0 when they do not lie inside a buffer
 * of `data_len` bytes in order. */
static inline int pb_span(const unsigned char *spans, Py_ssize_t i, Py_ssize_t data_len, Py_ssize_t *start,
                          Py_ssize_t *end) {
    int64_t pair[2];
    memcpy(pair, spans + 16 * i, 16);
    if (pair[0] < 0 || pair[0] > pair[1] || pair[1] > (int64_t)data_len) {
        return 0;
    }
    *start = (Py_ssize_t)pair[0];
    *end = (Py_ssize_t)pair[1];
    return 1;
}

/* The four arguments' buffers, held from pb_records_get to pb_records_release. */
typedef struct {
    Py_buffer data, spans, actions, origins;
    int held; /* buffers held, in that order */
    int with_origins;
    Py_ssize_t count;
} pb_records;

static void pb_records_release(pb_records *r) {
    Py_buffer *views[4] = {&r->data, &r->spans, &r->actions, &r->origins};
    for (int k = 0; k < r->held; k++) {
        PyBuffer_Release(views[k]);
    }
    r->held = 0;
}

/* Hold (data, spans, actions, origin_spans or None) for `who`: 0, or -1 with an exception set (not buffers, or
 * lengths that do not give one span and one action type per record). */
static int pb_records_get(pb_records *r, PyObject *data, PyObject *spans, PyObject *actions, PyObject *origins,
                          const char *who) {
    PyObject *sources[4] = {data, spans, actions, origins};
    Py_buffer *views[4] = {&r->data, &r->spans, &r->actions, &r->origins};
    memset(r, 0, sizeof(*r));
    r->with_origins = origins != Py_None;
    for (int k = 0; k < 3 + r->with_origins; k++) {
        if (PyObject_GetBuffer(sources[k], views[k], PyBUF_SIMPLE) < 0) {
            pb_records_release(r);
            return -1;
        }
        r->held = k + 1;
    }
    r->count = r->actions.len;
    if (r->spans.len != 16 * r->count || (r->with_origins && r->origins.len != 16 * r->count)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd action types but %zd bytes of %s (16 a record)", who, r->count,
                     r->spans.len != 16 * r->count ? r->spans.len : r->origins.len,
                     r->spans.len != 16 * r->count ? "spans" : "origin spans");
        pb_records_release(r);
        return -1;
    }
    return 0;
}

/* Record i's body, or with `origin` its origin record (length 0: none): 1, or 0 when its span is not a range of
 * the data. */
static inline int pb_record_at(const pb_records *r, Py_ssize_t i, int origin, const unsigned char **body,
                               Py_ssize_t *len) {
    Py_ssize_t lo, hi;
    if (origin && !r->with_origins) {
        *body = r->data.buf;
        *len = 0;
        return 1;
    }
    if (!pb_span((origin ? r->origins : r->spans).buf, i, r->data.len, &lo, &hi)) {
        return 0;
    }
    *body = (const unsigned char *)r->data.buf + lo;
    *len = hi - lo;
    return 1;
}

#endif
