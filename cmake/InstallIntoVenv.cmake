# cmake -DBUILD_DIR=B -DVENV=V -P InstallIntoVenv.cmake: installs build B
# into the virtual environment V (tools/CMakeLists.txt's venv-install), or
# says why not when V has no python.
if(NOT EXISTS ${VENV}/bin/python)
  message(STATUS "venv-install: ${VENV} has no python (scripts/install-python.sh); "
                 "the Python tests need the package installed there")
  return()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${VENV}
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "venv-install: installing ${BUILD_DIR} into ${VENV} failed")
endif()
