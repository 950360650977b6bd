import type { Msg } from '../../../config/fields.ts';
import type { HttpFilterConfig, HttpFilterExtension, LiveHttpFilter } from '../types.ts';
import { applyFilterStateValues, compileFilterStateValues } from '../../common/set-filter-state.ts';

export const HTTP_SET_FILTER_STATE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config';

/**
 * envoy.filters.http.set_filter_state: on_request_headers values, formatted against the request,
 * stored in the request's filter state (objects shared with upstream reach the upstream connection,
 * e.g. the internal listener behind a CONNECT route).
 */
export const HTTP_SET_FILTER_STATE_EXTENSION: HttpFilterExtension = {
  typeUrl: HTTP_SET_FILTER_STATE_TYPE,
  legacyName: 'envoy.filters.http.set_filter_state',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    m?.onlyFields(['@type', 'on_request_headers']);
    const values = compileFilterStateValues(m?.list('on_request_headers') ?? []);
    const live: LiveHttpFilter = {
      decodeHeaders(cb) {
        applyFilterStateValues(values, cb.rec, cb.rec);
        return 'continue';
      },
    };
    return { name, live: () => live };
  },
};
