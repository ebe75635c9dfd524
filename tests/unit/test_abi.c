/*
 * test_abi.c - the hand-written CLR ABI (profiler/runtime/clr_abi.h) against the layout the runtime's
 * public headers (corprof.h, cor.h) give: type sizes, struct layouts and every vtable slot offset.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "clr_abi.h"

static int failed, passed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                  \
            failed++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

struct slot_row {
    const char *name;
    size_t offset;
    int slot;
};

/* slot numbers as listed in the reference; offsets as the compiler lays out our structs */
static const struct slot_row info_slots[] = {
    {"QueryInterface", offsetof(ICorProfilerInfo15Vtbl, QueryInterface), 0},
    {"AddRef", offsetof(ICorProfilerInfo15Vtbl, AddRef), 1},
    {"Release", offsetof(ICorProfilerInfo15Vtbl, Release), 2},
    {"GetClassFromObject", offsetof(ICorProfilerInfo15Vtbl, GetClassFromObject), 3},
    {"GetClassFromToken", offsetof(ICorProfilerInfo15Vtbl, GetClassFromToken), 4},
    {"GetCodeInfo", offsetof(ICorProfilerInfo15Vtbl, GetCodeInfo), 5},
    {"GetEventMask", offsetof(ICorProfilerInfo15Vtbl, GetEventMask), 6},
    {"GetFunctionFromIP", offsetof(ICorProfilerInfo15Vtbl, GetFunctionFromIP), 7},
    {"GetFunctionFromToken", offsetof(ICorProfilerInfo15Vtbl, GetFunctionFromToken), 8},
    {"GetHandleFromThread", offsetof(ICorProfilerInfo15Vtbl, GetHandleFromThread), 9},
    {"GetObjectSize", offsetof(ICorProfilerInfo15Vtbl, GetObjectSize), 10},
    {"IsArrayClass", offsetof(ICorProfilerInfo15Vtbl, IsArrayClass), 11},
    {"GetThreadInfo", offsetof(ICorProfilerInfo15Vtbl, GetThreadInfo), 12},
    {"GetCurrentThreadID", offsetof(ICorProfilerInfo15Vtbl, GetCurrentThreadID), 13},
    {"GetClassIDInfo", offsetof(ICorProfilerInfo15Vtbl, GetClassIDInfo), 14},
    {"GetFunctionInfo", offsetof(ICorProfilerInfo15Vtbl, GetFunctionInfo), 15},
    {"SetEventMask", offsetof(ICorProfilerInfo15Vtbl, SetEventMask), 16},
    {"SetEnterLeaveFunctionHooks", offsetof(ICorProfilerInfo15Vtbl, SetEnterLeaveFunctionHooks), 17},
    {"SetFunctionIDMapper", offsetof(ICorProfilerInfo15Vtbl, SetFunctionIDMapper), 18},
    {"GetTokenAndMetaDataFromFunction", offsetof(ICorProfilerInfo15Vtbl, GetTokenAndMetaDataFromFunction), 19},
    {"GetModuleInfo", offsetof(ICorProfilerInfo15Vtbl, GetModuleInfo), 20},
    {"GetModuleMetaData", offsetof(ICorProfilerInfo15Vtbl, GetModuleMetaData), 21},
    {"GetILFunctionBody", offsetof(ICorProfilerInfo15Vtbl, GetILFunctionBody), 22},
    {"GetILFunctionBodyAllocator", offsetof(ICorProfilerInfo15Vtbl, GetILFunctionBodyAllocator), 23},
    {"SetILFunctionBody", offsetof(ICorProfilerInfo15Vtbl, SetILFunctionBody), 24},
    {"GetAppDomainInfo", offsetof(ICorProfilerInfo15Vtbl, GetAppDomainInfo), 25},
    {"GetAssemblyInfo", offsetof(ICorProfilerInfo15Vtbl, GetAssemblyInfo), 26},
    {"SetFunctionReJIT", offsetof(ICorProfilerInfo15Vtbl, SetFunctionReJIT), 27},
    {"ForceGC", offsetof(ICorProfilerInfo15Vtbl, ForceGC), 28},
    {"SetILInstrumentedCodeMap", offsetof(ICorProfilerInfo15Vtbl, SetILInstrumentedCodeMap), 29},
    {"GetInprocInspectionInterface", offsetof(ICorProfilerInfo15Vtbl, GetInprocInspectionInterface), 30},
    {"GetInprocInspectionIThisThread", offsetof(ICorProfilerInfo15Vtbl, GetInprocInspectionIThisThread), 31},
    {"GetThreadContext", offsetof(ICorProfilerInfo15Vtbl, GetThreadContext), 32},
    {"BeginInprocDebugging", offsetof(ICorProfilerInfo15Vtbl, BeginInprocDebugging), 33},
    {"EndInprocDebugging", offsetof(ICorProfilerInfo15Vtbl, EndInprocDebugging), 34},
    {"GetILToNativeMapping", offsetof(ICorProfilerInfo15Vtbl, GetILToNativeMapping), 35},
    {"DoStackSnapshot", offsetof(ICorProfilerInfo15Vtbl, DoStackSnapshot), 36},
    {"SetEnterLeaveFunctionHooks2", offsetof(ICorProfilerInfo15Vtbl, SetEnterLeaveFunctionHooks2), 37},
    {"GetFunctionInfo2", offsetof(ICorProfilerInfo15Vtbl, GetFunctionInfo2), 38},
    {"GetStringLayout", offsetof(ICorProfilerInfo15Vtbl, GetStringLayout), 39},
    {"GetClassLayout", offsetof(ICorProfilerInfo15Vtbl, GetClassLayout), 40},
    {"GetClassIDInfo2", offsetof(ICorProfilerInfo15Vtbl, GetClassIDInfo2), 41},
    {"GetCodeInfo2", offsetof(ICorProfilerInfo15Vtbl, GetCodeInfo2), 42},
    {"GetClassFromTokenAndTypeArgs", offsetof(ICorProfilerInfo15Vtbl, GetClassFromTokenAndTypeArgs), 43},
    {"GetFunctionFromTokenAndTypeArgs", offsetof(ICorProfilerInfo15Vtbl, GetFunctionFromTokenAndTypeArgs), 44},
    {"EnumModuleFrozenObjects", offsetof(ICorProfilerInfo15Vtbl, EnumModuleFrozenObjects), 45},
    {"GetArrayObjectInfo", offsetof(ICorProfilerInfo15Vtbl, GetArrayObjectInfo), 46},
    {"GetBoxClassLayout", offsetof(ICorProfilerInfo15Vtbl, GetBoxClassLayout), 47},
    {"GetThreadAppDomain", offsetof(ICorProfilerInfo15Vtbl, GetThreadAppDomain), 48},
    {"GetRVAStaticAddress", offsetof(ICorProfilerInfo15Vtbl, GetRVAStaticAddress), 49},
    {"GetAppDomainStaticAddress", offsetof(ICorProfilerInfo15Vtbl, GetAppDomainStaticAddress), 50},
    {"GetThreadStaticAddress", offsetof(ICorProfilerInfo15Vtbl, GetThreadStaticAddress), 51},
    {"GetContextStaticAddress", offsetof(ICorProfilerInfo15Vtbl, GetContextStaticAddress), 52},
    {"GetStaticFieldInfo", offsetof(ICorProfilerInfo15Vtbl, GetStaticFieldInfo), 53},
    {"GetGenerationBounds", offsetof(ICorProfilerInfo15Vtbl, GetGenerationBounds), 54},
    {"GetObjectGeneration", offsetof(ICorProfilerInfo15Vtbl, GetObjectGeneration), 55},
    {"GetNotifiedExceptionClauseInfo", offsetof(ICorProfilerInfo15Vtbl, GetNotifiedExceptionClauseInfo), 56},
    {"EnumJITedFunctions", offsetof(ICorProfilerInfo15Vtbl, EnumJITedFunctions), 57},
    {"RequestProfilerDetach", offsetof(ICorProfilerInfo15Vtbl, RequestProfilerDetach), 58},
    {"SetFunctionIDMapper2", offsetof(ICorProfilerInfo15Vtbl, SetFunctionIDMapper2), 59},
    {"GetStringLayout2", offsetof(ICorProfilerInfo15Vtbl, GetStringLayout2), 60},
    {"SetEnterLeaveFunctionHooks3", offsetof(ICorProfilerInfo15Vtbl, SetEnterLeaveFunctionHooks3), 61},
    {"SetEnterLeaveFunctionHooks3WithInfo", offsetof(ICorProfilerInfo15Vtbl, SetEnterLeaveFunctionHooks3WithInfo), 62},
    {"GetFunctionEnter3Info", offsetof(ICorProfilerInfo15Vtbl, GetFunctionEnter3Info), 63},
    {"GetFunctionLeave3Info", offsetof(ICorProfilerInfo15Vtbl, GetFunctionLeave3Info), 64},
    {"GetFunctionTailcall3Info", offsetof(ICorProfilerInfo15Vtbl, GetFunctionTailcall3Info), 65},
    {"EnumModules", offsetof(ICorProfilerInfo15Vtbl, EnumModules), 66},
    {"GetRuntimeInformation", offsetof(ICorProfilerInfo15Vtbl, GetRuntimeInformation), 67},
    {"GetThreadStaticAddress2", offsetof(ICorProfilerInfo15Vtbl, GetThreadStaticAddress2), 68},
    {"GetAppDomainsContainingModule", offsetof(ICorProfilerInfo15Vtbl, GetAppDomainsContainingModule), 69},
    {"GetModuleInfo2", offsetof(ICorProfilerInfo15Vtbl, GetModuleInfo2), 70},
    {"EnumThreads", offsetof(ICorProfilerInfo15Vtbl, EnumThreads), 71},
    {"InitializeCurrentThread", offsetof(ICorProfilerInfo15Vtbl, InitializeCurrentThread), 72},
    {"RequestReJIT", offsetof(ICorProfilerInfo15Vtbl, RequestReJIT), 73},
    {"RequestRevert", offsetof(ICorProfilerInfo15Vtbl, RequestRevert), 74},
    {"GetCodeInfo3", offsetof(ICorProfilerInfo15Vtbl, GetCodeInfo3), 75},
    {"GetFunctionFromIP2", offsetof(ICorProfilerInfo15Vtbl, GetFunctionFromIP2), 76},
    {"GetReJITIDs", offsetof(ICorProfilerInfo15Vtbl, GetReJITIDs), 77},
    {"GetILToNativeMapping2", offsetof(ICorProfilerInfo15Vtbl, GetILToNativeMapping2), 78},
    {"EnumJITedFunctions2", offsetof(ICorProfilerInfo15Vtbl, EnumJITedFunctions2), 79},
    {"GetObjectSize2", offsetof(ICorProfilerInfo15Vtbl, GetObjectSize2), 80},
    {"GetEventMask2", offsetof(ICorProfilerInfo15Vtbl, GetEventMask2), 81},
    {"SetEventMask2", offsetof(ICorProfilerInfo15Vtbl, SetEventMask2), 82},
    {"EnumNgenModuleMethodsInliningThisMethod", offsetof(ICorProfilerInfo15Vtbl, EnumNgenModuleMethodsInliningThisMethod), 83},
    {"ApplyMetaData", offsetof(ICorProfilerInfo15Vtbl, ApplyMetaData), 84},
    {"GetInMemorySymbolsLength", offsetof(ICorProfilerInfo15Vtbl, GetInMemorySymbolsLength), 85},
    {"ReadInMemorySymbols", offsetof(ICorProfilerInfo15Vtbl, ReadInMemorySymbols), 86},
    {"IsFunctionDynamic", offsetof(ICorProfilerInfo15Vtbl, IsFunctionDynamic), 87},
    {"GetFunctionFromIP3", offsetof(ICorProfilerInfo15Vtbl, GetFunctionFromIP3), 88},
    {"GetDynamicFunctionInfo", offsetof(ICorProfilerInfo15Vtbl, GetDynamicFunctionInfo), 89},
    {"GetNativeCodeStartAddresses", offsetof(ICorProfilerInfo15Vtbl, GetNativeCodeStartAddresses), 90},
    {"GetILToNativeMapping3", offsetof(ICorProfilerInfo15Vtbl, GetILToNativeMapping3), 91},
    {"GetCodeInfo4", offsetof(ICorProfilerInfo15Vtbl, GetCodeInfo4), 92},
    {"EnumerateObjectReferences", offsetof(ICorProfilerInfo15Vtbl, EnumerateObjectReferences), 93},
    {"IsFrozenObject", offsetof(ICorProfilerInfo15Vtbl, IsFrozenObject), 94},
    {"GetLOHObjectSizeThreshold", offsetof(ICorProfilerInfo15Vtbl, GetLOHObjectSizeThreshold), 95},
    {"RequestReJITWithInliners", offsetof(ICorProfilerInfo15Vtbl, RequestReJITWithInliners), 96},
    {"SuspendRuntime", offsetof(ICorProfilerInfo15Vtbl, SuspendRuntime), 97},
    {"ResumeRuntime", offsetof(ICorProfilerInfo15Vtbl, ResumeRuntime), 98},
    {"GetEnvironmentVariable", offsetof(ICorProfilerInfo15Vtbl, GetEnvironmentVariable), 99},
    {"SetEnvironmentVariable", offsetof(ICorProfilerInfo15Vtbl, SetEnvironmentVariable), 100},
    {"EventPipeStartSession", offsetof(ICorProfilerInfo15Vtbl, EventPipeStartSession), 101},
    {"EventPipeAddProviderToSession", offsetof(ICorProfilerInfo15Vtbl, EventPipeAddProviderToSession), 102},
    {"EventPipeStopSession", offsetof(ICorProfilerInfo15Vtbl, EventPipeStopSession), 103},
    {"EventPipeCreateProvider", offsetof(ICorProfilerInfo15Vtbl, EventPipeCreateProvider), 104},
    {"EventPipeGetProviderInfo", offsetof(ICorProfilerInfo15Vtbl, EventPipeGetProviderInfo), 105},
    {"EventPipeDefineEvent", offsetof(ICorProfilerInfo15Vtbl, EventPipeDefineEvent), 106},
    {"EventPipeWriteEvent", offsetof(ICorProfilerInfo15Vtbl, EventPipeWriteEvent), 107},
    {"CreateHandle", offsetof(ICorProfilerInfo15Vtbl, CreateHandle), 108},
    {"DestroyHandle", offsetof(ICorProfilerInfo15Vtbl, DestroyHandle), 109},
    {"GetObjectIDFromHandle", offsetof(ICorProfilerInfo15Vtbl, GetObjectIDFromHandle), 110},
    {"EnumerateNonGCObjects", offsetof(ICorProfilerInfo15Vtbl, EnumerateNonGCObjects), 111},
    {"GetNonGCHeapBounds", offsetof(ICorProfilerInfo15Vtbl, GetNonGCHeapBounds), 112},
    {"EventPipeCreateProvider2", offsetof(ICorProfilerInfo15Vtbl, EventPipeCreateProvider2), 113},
    {"EnumerateGCHeapObjects", offsetof(ICorProfilerInfo15Vtbl, EnumerateGCHeapObjects), 114},
};

static const struct slot_row md_slots[] = {
    {"QueryInterface", offsetof(IMetaDataImportVtbl, QueryInterface), 0},
    {"AddRef", offsetof(IMetaDataImportVtbl, AddRef), 1},
    {"Release", offsetof(IMetaDataImportVtbl, Release), 2},
    {"CloseEnum", offsetof(IMetaDataImportVtbl, CloseEnum), 3},
    {"CountEnum", offsetof(IMetaDataImportVtbl, CountEnum), 4},
    {"ResetEnum", offsetof(IMetaDataImportVtbl, ResetEnum), 5},
    {"EnumTypeDefs", offsetof(IMetaDataImportVtbl, EnumTypeDefs), 6},
    {"EnumInterfaceImpls", offsetof(IMetaDataImportVtbl, EnumInterfaceImpls), 7},
    {"EnumTypeRefs", offsetof(IMetaDataImportVtbl, EnumTypeRefs), 8},
    {"FindTypeDefByName", offsetof(IMetaDataImportVtbl, FindTypeDefByName), 9},
    {"GetScopeProps", offsetof(IMetaDataImportVtbl, GetScopeProps), 10},
    {"GetModuleFromScope", offsetof(IMetaDataImportVtbl, GetModuleFromScope), 11},
    {"GetTypeDefProps", offsetof(IMetaDataImportVtbl, GetTypeDefProps), 12},
    {"GetInterfaceImplProps", offsetof(IMetaDataImportVtbl, GetInterfaceImplProps), 13},
    {"GetTypeRefProps", offsetof(IMetaDataImportVtbl, GetTypeRefProps), 14},
    {"ResolveTypeRef", offsetof(IMetaDataImportVtbl, ResolveTypeRef), 15},
    {"EnumMembers", offsetof(IMetaDataImportVtbl, EnumMembers), 16},
    {"EnumMembersWithName", offsetof(IMetaDataImportVtbl, EnumMembersWithName), 17},
    {"EnumMethods", offsetof(IMetaDataImportVtbl, EnumMethods), 18},
    {"EnumMethodsWithName", offsetof(IMetaDataImportVtbl, EnumMethodsWithName), 19},
    {"EnumFields", offsetof(IMetaDataImportVtbl, EnumFields), 20},
    {"EnumFieldsWithName", offsetof(IMetaDataImportVtbl, EnumFieldsWithName), 21},
    {"EnumParams", offsetof(IMetaDataImportVtbl, EnumParams), 22},
    {"EnumMemberRefs", offsetof(IMetaDataImportVtbl, EnumMemberRefs), 23},
    {"EnumMethodImpls", offsetof(IMetaDataImportVtbl, EnumMethodImpls), 24},
    {"EnumPermissionSets", offsetof(IMetaDataImportVtbl, EnumPermissionSets), 25},
    {"FindMember", offsetof(IMetaDataImportVtbl, FindMember), 26},
    {"FindMethod", offsetof(IMetaDataImportVtbl, FindMethod), 27},
    {"FindField", offsetof(IMetaDataImportVtbl, FindField), 28},
    {"FindMemberRef", offsetof(IMetaDataImportVtbl, FindMemberRef), 29},
    {"GetMethodProps", offsetof(IMetaDataImportVtbl, GetMethodProps), 30},
    {"GetMemberRefProps", offsetof(IMetaDataImportVtbl, GetMemberRefProps), 31},
    {"EnumProperties", offsetof(IMetaDataImportVtbl, EnumProperties), 32},
    {"EnumEvents", offsetof(IMetaDataImportVtbl, EnumEvents), 33},
    {"GetEventProps", offsetof(IMetaDataImportVtbl, GetEventProps), 34},
    {"EnumMethodSemantics", offsetof(IMetaDataImportVtbl, EnumMethodSemantics), 35},
    {"GetMethodSemantics", offsetof(IMetaDataImportVtbl, GetMethodSemantics), 36},
    {"GetClassLayout", offsetof(IMetaDataImportVtbl, GetClassLayout), 37},
    {"GetFieldMarshal", offsetof(IMetaDataImportVtbl, GetFieldMarshal), 38},
    {"GetRVA", offsetof(IMetaDataImportVtbl, GetRVA), 39},
    {"GetPermissionSetProps", offsetof(IMetaDataImportVtbl, GetPermissionSetProps), 40},
    {"GetSigFromToken", offsetof(IMetaDataImportVtbl, GetSigFromToken), 41},
    {"GetModuleRefProps", offsetof(IMetaDataImportVtbl, GetModuleRefProps), 42},
    {"EnumModuleRefs", offsetof(IMetaDataImportVtbl, EnumModuleRefs), 43},
    {"GetTypeSpecFromToken", offsetof(IMetaDataImportVtbl, GetTypeSpecFromToken), 44},
    {"GetNameFromToken", offsetof(IMetaDataImportVtbl, GetNameFromToken), 45},
    {"EnumUnresolvedMethods", offsetof(IMetaDataImportVtbl, EnumUnresolvedMethods), 46},
    {"GetUserString", offsetof(IMetaDataImportVtbl, GetUserString), 47},
    {"GetPinvokeMap", offsetof(IMetaDataImportVtbl, GetPinvokeMap), 48},
    {"EnumSignatures", offsetof(IMetaDataImportVtbl, EnumSignatures), 49},
    {"EnumTypeSpecs", offsetof(IMetaDataImportVtbl, EnumTypeSpecs), 50},
    {"EnumUserStrings", offsetof(IMetaDataImportVtbl, EnumUserStrings), 51},
    {"GetParamForMethodIndex", offsetof(IMetaDataImportVtbl, GetParamForMethodIndex), 52},
    {"EnumCustomAttributes", offsetof(IMetaDataImportVtbl, EnumCustomAttributes), 53},
    {"GetCustomAttributeProps", offsetof(IMetaDataImportVtbl, GetCustomAttributeProps), 54},
    {"FindTypeRef", offsetof(IMetaDataImportVtbl, FindTypeRef), 55},
    {"GetMemberProps", offsetof(IMetaDataImportVtbl, GetMemberProps), 56},
    {"GetFieldProps", offsetof(IMetaDataImportVtbl, GetFieldProps), 57},
    {"GetPropertyProps", offsetof(IMetaDataImportVtbl, GetPropertyProps), 58},
    {"GetParamProps", offsetof(IMetaDataImportVtbl, GetParamProps), 59},
    {"GetCustomAttributeByName", offsetof(IMetaDataImportVtbl, GetCustomAttributeByName), 60},
    {"IsValidToken", offsetof(IMetaDataImportVtbl, IsValidToken), 61},
    {"GetNestedClassProps", offsetof(IMetaDataImportVtbl, GetNestedClassProps), 62},
    {"GetNativeCallConvFromSig", offsetof(IMetaDataImportVtbl, GetNativeCallConvFromSig), 63},
    {"IsGlobal", offsetof(IMetaDataImportVtbl, IsGlobal), 64},
};

static const struct {
    const char *name;
    int value, slot;
} cb_slots[] = {
    {"QueryInterface", CB_QueryInterface, 0},
    {"AddRef", CB_AddRef, 1},
    {"Release", CB_Release, 2},
    {"Initialize", CB_Initialize, 3},
    {"Shutdown", CB_Shutdown, 4},
    {"AppDomainCreationStarted", CB_AppDomainCreationStarted, 5},
    {"AppDomainCreationFinished", CB_AppDomainCreationFinished, 6},
    {"AppDomainShutdownStarted", CB_AppDomainShutdownStarted, 7},
    {"AppDomainShutdownFinished", CB_AppDomainShutdownFinished, 8},
    {"AssemblyLoadStarted", CB_AssemblyLoadStarted, 9},
    {"AssemblyLoadFinished", CB_AssemblyLoadFinished, 10},
    {"AssemblyUnloadStarted", CB_AssemblyUnloadStarted, 11},
    {"AssemblyUnloadFinished", CB_AssemblyUnloadFinished, 12},
    {"ModuleLoadStarted", CB_ModuleLoadStarted, 13},
    {"ModuleLoadFinished", CB_ModuleLoadFinished, 14},
    {"ModuleUnloadStarted", CB_ModuleUnloadStarted, 15},
    {"ModuleUnloadFinished", CB_ModuleUnloadFinished, 16},
    {"ModuleAttachedToAssembly", CB_ModuleAttachedToAssembly, 17},
    {"ClassLoadStarted", CB_ClassLoadStarted, 18},
    {"ClassLoadFinished", CB_ClassLoadFinished, 19},
    {"ClassUnloadStarted", CB_ClassUnloadStarted, 20},
    {"ClassUnloadFinished", CB_ClassUnloadFinished, 21},
    {"FunctionUnloadStarted", CB_FunctionUnloadStarted, 22},
    {"JITCompilationStarted", CB_JITCompilationStarted, 23},
    {"JITCompilationFinished", CB_JITCompilationFinished, 24},
    {"JITCachedFunctionSearchStarted", CB_JITCachedFunctionSearchStarted, 25},
    {"JITCachedFunctionSearchFinished", CB_JITCachedFunctionSearchFinished, 26},
    {"JITFunctionPitched", CB_JITFunctionPitched, 27},
    {"JITInlining", CB_JITInlining, 28},
    {"ThreadCreated", CB_ThreadCreated, 29},
    {"ThreadDestroyed", CB_ThreadDestroyed, 30},
    {"ThreadAssignedToOSThread", CB_ThreadAssignedToOSThread, 31},
    {"RemotingClientInvocationStarted", CB_RemotingClientInvocationStarted, 32},
    {"RemotingClientSendingMessage", CB_RemotingClientSendingMessage, 33},
    {"RemotingClientReceivingReply", CB_RemotingClientReceivingReply, 34},
    {"RemotingClientInvocationFinished", CB_RemotingClientInvocationFinished, 35},
    {"RemotingServerReceivingMessage", CB_RemotingServerReceivingMessage, 36},
    {"RemotingServerInvocationStarted", CB_RemotingServerInvocationStarted, 37},
    {"RemotingServerInvocationReturned", CB_RemotingServerInvocationReturned, 38},
    {"RemotingServerSendingReply", CB_RemotingServerSendingReply, 39},
    {"UnmanagedToManagedTransition", CB_UnmanagedToManagedTransition, 40},
    {"ManagedToUnmanagedTransition", CB_ManagedToUnmanagedTransition, 41},
    {"RuntimeSuspendStarted", CB_RuntimeSuspendStarted, 42},
    {"RuntimeSuspendFinished", CB_RuntimeSuspendFinished, 43},
    {"RuntimeSuspendAborted", CB_RuntimeSuspendAborted, 44},
    {"RuntimeResumeStarted", CB_RuntimeResumeStarted, 45},
    {"RuntimeResumeFinished", CB_RuntimeResumeFinished, 46},
    {"RuntimeThreadSuspended", CB_RuntimeThreadSuspended, 47},
    {"RuntimeThreadResumed", CB_RuntimeThreadResumed, 48},
    {"MovedReferences", CB_MovedReferences, 49},
    {"ObjectAllocated", CB_ObjectAllocated, 50},
    {"ObjectsAllocatedByClass", CB_ObjectsAllocatedByClass, 51},
    {"ObjectReferences", CB_ObjectReferences, 52},
    {"RootReferences", CB_RootReferences, 53},
    {"ExceptionThrown", CB_ExceptionThrown, 54},
    {"ExceptionSearchFunctionEnter", CB_ExceptionSearchFunctionEnter, 55},
    {"ExceptionSearchFunctionLeave", CB_ExceptionSearchFunctionLeave, 56},
    {"ExceptionSearchFilterEnter", CB_ExceptionSearchFilterEnter, 57},
    {"ExceptionSearchFilterLeave", CB_ExceptionSearchFilterLeave, 58},
    {"ExceptionSearchCatcherFound", CB_ExceptionSearchCatcherFound, 59},
    {"ExceptionOSHandlerEnter", CB_ExceptionOSHandlerEnter, 60},
    {"ExceptionOSHandlerLeave", CB_ExceptionOSHandlerLeave, 61},
    {"ExceptionUnwindFunctionEnter", CB_ExceptionUnwindFunctionEnter, 62},
    {"ExceptionUnwindFunctionLeave", CB_ExceptionUnwindFunctionLeave, 63},
    {"ExceptionUnwindFinallyEnter", CB_ExceptionUnwindFinallyEnter, 64},
    {"ExceptionUnwindFinallyLeave", CB_ExceptionUnwindFinallyLeave, 65},
    {"ExceptionCatcherEnter", CB_ExceptionCatcherEnter, 66},
    {"ExceptionCatcherLeave", CB_ExceptionCatcherLeave, 67},
    {"COMClassicVTableCreated", CB_COMClassicVTableCreated, 68},
    {"COMClassicVTableDestroyed", CB_COMClassicVTableDestroyed, 69},
    {"ExceptionCLRCatcherFound", CB_ExceptionCLRCatcherFound, 70},
    {"ExceptionCLRCatcherExecute", CB_ExceptionCLRCatcherExecute, 71},
    {"ThreadNameChanged", CB_ThreadNameChanged, 72},
    {"GarbageCollectionStarted", CB_GarbageCollectionStarted, 73},
    {"SurvivingReferences", CB_SurvivingReferences, 74},
    {"GarbageCollectionFinished", CB_GarbageCollectionFinished, 75},
    {"FinalizeableObjectQueued", CB_FinalizeableObjectQueued, 76},
    {"RootReferences2", CB_RootReferences2, 77},
    {"HandleCreated", CB_HandleCreated, 78},
    {"HandleDestroyed", CB_HandleDestroyed, 79},
    {"InitializeForAttach", CB_InitializeForAttach, 80},
    {"ProfilerAttachComplete", CB_ProfilerAttachComplete, 81},
    {"ProfilerDetachSucceeded", CB_ProfilerDetachSucceeded, 82},
    {"ReJITCompilationStarted", CB_ReJITCompilationStarted, 83},
    {"GetReJITParameters", CB_GetReJITParameters, 84},
    {"ReJITCompilationFinished", CB_ReJITCompilationFinished, 85},
    {"ReJITError", CB_ReJITError, 86},
    {"MovedReferences2", CB_MovedReferences2, 87},
    {"SurvivingReferences2", CB_SurvivingReferences2, 88},
    {"ConditionalWeakTableElementReferences", CB_ConditionalWeakTableElementReferences, 89},
    {"GetAssemblyReferences", CB_GetAssemblyReferences, 90},
    {"ModuleInMemorySymbolsUpdated", CB_ModuleInMemorySymbolsUpdated, 91},
    {"DynamicMethodJITCompilationStarted", CB_DynamicMethodJITCompilationStarted, 92},
    {"DynamicMethodJITCompilationFinished", CB_DynamicMethodJITCompilationFinished, 93},
    {"DynamicMethodUnloaded", CB_DynamicMethodUnloaded, 94},
    {"EventPipeEventDelivered", CB_EventPipeEventDelivered, 95},
    {"EventPipeProviderCreated", CB_EventPipeProviderCreated, 96},
    {"LoadAsNotificationOnly", CB_LoadAsNotificationOnly, 97},
};

int main(void)
{
    CHECK(sizeof(GUID) == 16, "GUID is %zu bytes", sizeof(GUID));
    CHECK(sizeof(WCHAR) == 2, "WCHAR");
    CHECK(sizeof(ULONG) == 4 && sizeof(DWORD) == 4 && sizeof(HRESULT) == 4 && sizeof(BOOL) == 4,
          "32-bit LONG family");
    CHECK(sizeof(ClassID) == 8 && sizeof(FunctionID) == 8 && sizeof(ThreadID) == 8, "IDs");
    CHECK(sizeof(EVENTPIPE_SESSION) == 8 && sizeof(mdToken) == 4, "session/token");
    CHECK(sizeof(COR_PRF_EVENTPIPE_PROVIDER_CONFIG) == 32, "provider config is %zu",
          sizeof(COR_PRF_EVENTPIPE_PROVIDER_CONFIG));
    CHECK(offsetof(COR_PRF_EVENTPIPE_PROVIDER_CONFIG, keywords) == 8 &&
              offsetof(COR_PRF_EVENTPIPE_PROVIDER_CONFIG, loggingLevel) == 16 &&
              offsetof(COR_PRF_EVENTPIPE_PROVIDER_CONFIG, filterData) == 24,
          "provider config layout");
    CHECK(sizeof(ICorProfilerInfo15Vtbl) == 115 * 8, "Info15 vtable has %zu slots",
          sizeof(ICorProfilerInfo15Vtbl) / 8);
    CHECK(sizeof(IMetaDataImportVtbl) == 65 * 8, "IMetaDataImport vtable size");
    CHECK(CB_SLOT_COUNT == 98, "Callback11 has 98 slots");
    CHECK(CB_ExceptionThrown == 54, "ExceptionThrown is callback slot 54");
    CHECK(sizeof(COR_FIELD_OFFSET) == 8 && offsetof(COR_FIELD_OFFSET, ulOffset) == 4,
          "COR_FIELD_OFFSET {mdFieldDef, ULONG}");
    CHECK(offsetof(ICorProfilerModuleEnumVtbl, Next) == 7 * 8 &&
              sizeof(ICorProfilerModuleEnumVtbl) == 8 * 8,
          "enumerators: IUnknown, Skip, Reset, Clone, GetCount, Next");
    for (size_t i = 0; i < sizeof info_slots / sizeof info_slots[0]; i++)
        CHECK(info_slots[i].offset == (size_t)info_slots[i].slot * 8, "Info %s at %zu, want slot %d",
              info_slots[i].name, info_slots[i].offset, info_slots[i].slot);
    for (size_t i = 0; i < sizeof md_slots / sizeof md_slots[0]; i++)
        CHECK(md_slots[i].offset == (size_t)md_slots[i].slot * 8, "MetaData %s at %zu, want %d",
              md_slots[i].name, md_slots[i].offset, md_slots[i].slot);
    for (size_t i = 0; i < sizeof cb_slots / sizeof cb_slots[0]; i++)
        CHECK(cb_slots[i].value == cb_slots[i].slot, "Callback %s = %d, want %d", cb_slots[i].name,
              cb_slots[i].value, cb_slots[i].slot);
    /* spot checks straight from the reference text */
    CHECK(offsetof(ICorProfilerInfo15Vtbl, SuspendRuntime) == 97 * 8, "SuspendRuntime slot 97");
    CHECK(offsetof(ICorProfilerInfo15Vtbl, SetEventMask2) == 82 * 8, "SetEventMask2 slot 82");
    CHECK(offsetof(ICorProfilerInfo15Vtbl, EventPipeStartSession) == 101 * 8, "EP start 101");
    CHECK(offsetof(ICorProfilerInfo15Vtbl, CreateHandle) == 108 * 8, "CreateHandle 108");
    CHECK(CB_EventPipeEventDelivered == 95 && CB_GarbageCollectionStarted == 73, "callbacks");
    const GUID cb2 = {0x8A8CC829, 0xCCF2, 0x49FE, {0xBB, 0xAE, 0x0F, 0x02, 0x22, 0x28, 0x07, 0x1A}};
    CHECK(clr_guid_eq(&IID_ICorProfilerCallback[2], &cb2), "IID_ICorProfilerCallback2");
    unsigned char raw[16];
    memcpy(raw, &IID_ICorProfilerInfo[12], 16);
    CHECK(raw[0] == 0xCD && raw[1] == 0x4C && raw[2] == 0xB2 && raw[3] == 0x27 && raw[4] == 0xB1,
          "Info12 IID byte order (little-endian Data1/Data2)");
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
