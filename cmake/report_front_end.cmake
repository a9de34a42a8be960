# The front end of `memtune report` (docs/report.md): report/web/'s template, script and
# styles, plus the charting library (uPlot) that `npm ci` installs from the pinned
# report/web/package-lock.json into <build>/report-web/node_modules at configure time
# (npm's cache makes reconfigures offline). Without npm, or when `npm ci` fails (no network
# and no cache), the build goes on without the library: `memtune report` then says so and
# the browser test is skipped. Sets MEMTUNE_REPORT_NODE_MODULES ("" without the library).

option(MEMTUNE_REPORT_FRONT_END "Install the report front end's charting library with npm" ON)
set(web ${PROJECT_SOURCE_DIR}/report/web)
set(node_dir ${PROJECT_BINARY_DIR}/report-web)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${web}/package.json
                                                               ${web}/package-lock.json)
find_program(MEMTUNE_NPM npm)
set(MEMTUNE_REPORT_NODE_MODULES "")
if(MEMTUNE_REPORT_FRONT_END AND MEMTUNE_NPM)
  file(SHA256 ${web}/package-lock.json lock_hash)
  set(stamp ${node_dir}/installed.sha256)
  set(installed "")
  if(EXISTS ${stamp})
    file(READ ${stamp} installed)
  endif()
  if(NOT installed STREQUAL lock_hash)
    file(MAKE_DIRECTORY ${node_dir})
    file(COPY ${web}/package.json ${web}/package-lock.json DESTINATION ${node_dir})
    message(STATUS "memtune: npm ci (report front end) in ${node_dir}")
    execute_process(COMMAND ${MEMTUNE_NPM} ci --ignore-scripts --no-audit --no-fund
                            --prefer-offline --fetch-retries=1 --fetch-timeout=20000
                    WORKING_DIRECTORY ${node_dir} RESULT_VARIABLE npm_rc
                    OUTPUT_QUIET ERROR_VARIABLE npm_err TIMEOUT 600)
    if(npm_rc EQUAL 0)
      file(WRITE ${stamp} ${lock_hash})
    else()
      file(REMOVE_RECURSE ${node_dir}/node_modules)
      message(WARNING "memtune: npm ci failed (${npm_rc}); building `memtune report` without "
                      "its front end (docs/report.md): ${npm_err}")
    endif()
  endif()
  if(EXISTS ${node_dir}/node_modules/uplot/dist/uPlot.iife.min.js)
    set(MEMTUNE_REPORT_NODE_MODULES ${node_dir}/node_modules)
  endif()
elseif(MEMTUNE_REPORT_FRONT_END)
  message(WARNING "memtune: npm not found; building `memtune report` without its front end")
endif()

set(web_files ${web}/template.html ${web}/report.js ${web}/report.css)
if(MEMTUNE_REPORT_NODE_MODULES)
  list(APPEND web_files ${MEMTUNE_REPORT_NODE_MODULES}/uplot/dist/uPlot.iife.min.js
                        ${MEMTUNE_REPORT_NODE_MODULES}/uplot/dist/uPlot.min.css)
endif()
memtune_embed_files(memtune_report kReportWebFiles ${PROJECT_BINARY_DIR}/generated/report_web.cc
                    ${web_files})
